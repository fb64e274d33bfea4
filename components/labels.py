"""Cloud tags and labels on what the program provisions itself (cloud resources, whose
keys reject '/'). Kubernetes labels come from the core (modelplane.vocabulary)."""

from __future__ import annotations


def cloud_tags(cluster: str, pool: str | None = None) -> dict[str, str]:
    # Cloud tag keys reject '/', and GCP labels also reject '.', so keep them plain.
    tags = {"modelplane-part-of": "modelplane", "modelplane-cluster": cluster,
            "modelplane-managed-by": "pulumi"}
    if pool:
        tags["modelplane-pool"] = pool
    return tags


def gcp_labels(cluster: str, pool: str | None = None) -> dict[str, str]:
    return {k: v.lower() for k, v in cloud_tags(cluster, pool).items()}
