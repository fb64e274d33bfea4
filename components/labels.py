"""Labels and tags stamped on everything the program creates itself (the renderers
label what they render)."""

from __future__ import annotations

# Re-exported for the components: one definition of the label contract, in the renderers.
from modelplane.render.meta import LABEL_CLUSTER as CLUSTER  # noqa: F401
from modelplane.render.meta import LABEL_POOL as POOL  # noqa: F401

PART_OF = "app.kubernetes.io/part-of"
MANAGED_BY = "app.kubernetes.io/managed-by"
COMPONENT = "app.kubernetes.io/component"


def k8s_labels(component: str, extra: dict[str, str] | None = None) -> dict[str, str]:
    labels = {PART_OF: "modelplane", MANAGED_BY: "pulumi", COMPONENT: component}
    labels.update(extra or {})
    return labels


def cloud_tags(cluster: str, pool: str | None = None) -> dict[str, str]:
    # Cloud tag keys reject '/', and GCP labels also reject '.', so keep them plain.
    tags = {"modelplane-part-of": "modelplane", "modelplane-cluster": cluster,
            "modelplane-managed-by": "pulumi"}
    if pool:
        tags["modelplane-pool"] = pool
    return tags


def gcp_labels(cluster: str, pool: str | None = None) -> dict[str, str]:
    return {k: v.lower() for k, v in cloud_tags(cluster, pool).items()}
