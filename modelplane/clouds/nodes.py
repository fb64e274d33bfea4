"""The labels and taints our provisioned (EKS/GKE) GPU node pools carry. The NVIDIA DRA
kubelet plugin's affinity they must satisfy is in modelplane.clouds.nvidia."""

from __future__ import annotations

from modelplane.api import Fleet, InferenceCluster, NodePool
from modelplane.render.meta import LABEL_POOL

from .nvidia import GKE_NO_DEFAULT_DEVICE_PLUGIN, GPU_PRESENT_LABEL, GPU_TAINT, uses_nvidia_dra


def provisioned_node_labels(fleet: Fleet, cluster: InferenceCluster, pool: NodePool) -> dict[str, str]:
    """The Kubernetes labels our EKS node group / GKE node pool for `pool` sets on its nodes
    (besides the ones the cloud sets itself). Empty for sources we do not provision."""
    if cluster.source not in ("EKS", "GKE"):
        return {}
    labels = {LABEL_POOL: pool.name}
    if uses_nvidia_dra(fleet, pool):
        labels[GPU_PRESENT_LABEL] = "true"
        if cluster.source == "GKE":
            labels[GKE_NO_DEFAULT_DEVICE_PLUGIN] = "true"
    return labels


def provisioned_node_taints(cluster: InferenceCluster, pool: NodePool) -> list[dict[str, str]]:
    """Taints our EKS GPU node groups declare (GKE taints GPU nodes itself, same key)."""
    if cluster.source == "EKS" and pool.is_gpu_pool:
        return [dict(GPU_TAINT)]
    return []
