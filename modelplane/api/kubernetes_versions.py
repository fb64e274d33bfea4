"""Kubernetes versions of the clusters the program provisions: what the rendered objects need of
a cluster's minor, and the cluster-autoscaler build for each minor. Part of the API: the loader
refuses a kubernetesVersion that cannot serve the fleet, before anything is planned.

* DRA: every ResourceClaimTemplate and DeviceClass the program renders is `resource.k8s.io/v1`,
  served from Kubernetes 1.34 (k8s-api-shapes.md §1.1; KEP-4381 GA); the EFA DRA driver
  (DRANET) needs 1.34 ("Manage EFA devices on Amazon EKS": minimum Kubernetes version 1.34),
  and GKE DRA too ("Prepare GKE infrastructure for DRA workloads": 1.34 or later). A cluster
  older than that accepts the charts and refuses every engine's claims.
* The cluster-autoscaler is built per Kubernetes minor and tested only with it (kubernetes/
  autoscaler cluster-autoscaler/README.md "Releases": "We recommend using Cluster Autoscaler with
  the Kubernetes control plane version for which it was meant"); chart 9.59.0 defaults to
  v1.35.0, so on any other minor the image is set to that minor's release.

Versions are written as EKS and GKE take them: EKS CreateCluster `version` is `<major>.<minor>`
("1.35"); GKE's `min_master_version` also takes `1.35.1-gke.1234` or `latest` (the newest, which
always serves DRA v1). Unset: EKS clusters get EKS_DEFAULT_VERSION, GKE clusters the release
channel's default version (new enough: GKE's REGULAR channel is past 1.34).
"""

from __future__ import annotations

import re

from .fleet import Fleet
from .inference_cluster import InferenceCluster

Minor = tuple[int, int]

# What the program renders needs at least this minor (above).
MIN_DRA_V1: Minor = (1, 34)
# The version our EKS clusters get when kubernetesVersion is unset.
EKS_DEFAULT_VERSION = "1.35"
# registry.k8s.io/autoscaling/cluster-autoscaler: the newest patch of each minor we pin
# (kubernetes/autoscaler tags cluster-autoscaler-1.34.5, -1.35.2, -1.36.1, 2026-07-22).
AUTOSCALER_IMAGE_TAGS: dict[Minor, str] = {(1, 34): "v1.34.5", (1, 35): "v1.35.2", (1, 36): "v1.36.1"}
# `enable-dynamic-resource-allocation` defaults to false before 1.35 and is locked to true from
# 1.35 (cluster-autoscaler config/flags/flags.go of 1.34.5 and 1.35.2; FAQ.md): set true always.
AUTOSCALER_DRA_ARGS = {"enable-dynamic-resource-allocation": True}

_EKS_VERSION = re.compile(r"1\.(\d{1,3})")
_GKE_VERSION = re.compile(r"1\.(\d{1,3})(?:\.\d{1,4}(?:-gke\.\d{1,12})?)?")
_FIELD = {"EKS": "eks", "GKE": "gke"}


def _shown(minor: Minor) -> str:
    return f"{minor[0]}.{minor[1]}"


def parse_version(source: str, version: str) -> Minor | None:
    """The (major, minor) of a declared kubernetesVersion; None for GKE's `latest`. ValueError
    naming the accepted spelling when the cloud would refuse it."""
    if source == "GKE":
        if version == "latest":
            return None
        m = _GKE_VERSION.fullmatch(version)
        if m is None:
            raise ValueError(f"kubernetesVersion {version!r} is not a GKE version: use '1.<minor>', "
                             "'1.<minor>.<patch>', '1.<minor>.<patch>-gke.<build>' or 'latest'")
        return 1, int(m.group(1))
    m = _EKS_VERSION.fullmatch(version)
    if m is None:
        raise ValueError(f"kubernetesVersion {version!r} is not an EKS version: EKS takes '<major>.<minor>' "
                         f"only, e.g. {EKS_DEFAULT_VERSION!r}")
    return 1, int(m.group(1))


def cluster_version(cluster: InferenceCluster) -> str | None:
    """The kubernetesVersion the program creates an EKS or GKE cluster with (the EKS default when
    unset); None for other sources and for a GKE cluster left to its release channel."""
    source = cluster.source
    block = cluster.spec.cluster.eks if source == "EKS" else cluster.spec.cluster.gke if source == "GKE" else None
    if block is None:
        return None
    if block.kubernetes_version:
        return block.kubernetes_version
    return EKS_DEFAULT_VERSION if source == "EKS" else None


def cluster_minor(cluster: InferenceCluster) -> Minor | None:
    version = cluster_version(cluster)
    return parse_version(cluster.source, version) if version is not None else None


def autoscaler_image_tag(cluster: InferenceCluster) -> str:
    """The cluster-autoscaler image tag for an EKS cluster's minor (the load checked it is pinned)."""
    minor = cluster_minor(cluster)
    if minor is None or minor not in AUTOSCALER_IMAGE_TAGS:
        raise ValueError(f"no cluster-autoscaler release is pinned for Kubernetes {cluster_version(cluster)}")
    return AUTOSCALER_IMAGE_TAGS[minor]


def _claims_dra(fleet: Fleet, cluster: InferenceCluster) -> bool:
    for pool in cluster.gpu_pools:
        klass = fleet.classes.get(pool.class_name or "")
        if klass is not None and any(d.claim == "DRA" for d in klass.spec.devices):
            return True
    return False


def version_issues(fleet: Fleet) -> list[tuple[InferenceCluster, str, str]]:
    """(cluster, field path, message) for every EKS/GKE kubernetesVersion the cloud would refuse,
    that cannot serve what the program renders there, or (EKS clusters the cluster-autoscaler
    runs on) whose minor has no autoscaler release pinned here. The loader calls it."""
    out: list[tuple[InferenceCluster, str, str]] = []
    for cluster in fleet.clusters.values():
        version = cluster_version(cluster)
        if version is None:
            continue
        path = f"spec.cluster.{_FIELD[cluster.source]}.kubernetesVersion"
        try:
            minor = parse_version(cluster.source, version)
        except ValueError as exc:
            out.append((cluster, path, str(exc)))
            continue
        if minor is None:
            continue
        if minor < MIN_DRA_V1 and _claims_dra(fleet, cluster):
            out.append((cluster, path, (
                f"Kubernetes {version} predates DRA resource.k8s.io/v1 (served from {_shown(MIN_DRA_V1)}), which the "
                "ResourceClaimTemplates and DeviceClasses rendered for this cluster's DRA pools use (and the EFA DRA "
                f"driver needs {_shown(MIN_DRA_V1)}): the charts install and every engine stays Pending. "
                f"Fix: kubernetesVersion: '{_shown(MIN_DRA_V1)}' or later (EKS default {EKS_DEFAULT_VERSION!r})")))
        elif cluster.autoscaled_pools and minor not in AUTOSCALER_IMAGE_TAGS:
            pinned = ", ".join(_shown(m) for m in sorted(AUTOSCALER_IMAGE_TAGS))
            out.append((cluster, path, (
                f"a pool can grow, so the cluster-autoscaler runs here, and it is built per Kubernetes minor; no "
                f"release is pinned for {_shown(minor)} (pinned: {pinned}; modelplane.api.kubernetes_versions). Fix: "
                f"kubernetesVersion: one of {pinned}, or fix every pool's size (no maxNodeCount above nodeCount)")))
    return out
