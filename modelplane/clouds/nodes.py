"""The labels and taints our provisioned GPU node pools carry, and the NVIDIA DRA driver's
kubelet-plugin node affinity they must satisfy.

The driver chart's kubelet plugin (the DaemonSet that publishes ResourceSlices) has a
*required* node affinity: one of Node Feature Discovery's NVIDIA PCI labels, NFD's NVIDIA
CPU vendor label, or the GPU Operator's `nvidia.com/gpu.present=true`
(kubernetes-sigs/dra-driver-nvidia-gpu, deployments/helm/dra-driver-nvidia-gpu/values.yaml,
`kubeletPlugin.affinity`). Neither EKS nor GKE sets any of them, and we install neither NFD
nor the GPU Operator, so our node pools set `nvidia.com/gpu.present=true` themselves.

GKE additionally needs `gke-no-default-nvidia-gpu-device-plugin=true` on DRA GPU pools
("Prepare GKE infrastructure for DRA workloads",
https://cloud.google.com/kubernetes-engine/docs/how-to/set-up-dra).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from modelplane.api import Fleet, InferenceCluster, NodePool
from modelplane.render.meta import LABEL_POOL

NVIDIA_DRIVER = "gpu.nvidia.com"
GPU_PRESENT_LABEL = "nvidia.com/gpu.present"
GKE_NO_DEFAULT_DEVICE_PLUGIN = "gke-no-default-nvidia-gpu-device-plugin"
GPU_TAINT_KEY = "nvidia.com/gpu"
# The taint our EKS GPU node groups declare; GKE puts the same key on GPU nodes itself.
GPU_TAINT = {"key": GPU_TAINT_KEY, "value": "present", "effect": "NoSchedule"}

NodeSelectorTerm = Mapping[str, Any]


def _term(key: str, value: str) -> dict[str, Any]:
    return {"matchExpressions": [{"key": key, "operator": "In", "values": [value]}]}


# kubeletPlugin.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution
# .nodeSelectorTerms of the chart's values.yaml (terms are ORed, expressions ANDed).
DRA_KUBELET_PLUGIN_NODE_SELECTOR_TERMS: tuple[dict[str, Any], ...] = (
    _term("feature.node.kubernetes.io/pci-10de.present", "true"),
    _term("feature.node.kubernetes.io/pci-0302_10de.present", "true"),
    _term("feature.node.kubernetes.io/pci-0300_10de.present", "true"),
    _term("feature.node.kubernetes.io/cpu-model.vendor_id", "NVIDIA"),
    _term(GPU_PRESENT_LABEL, "true"),
)


def _expression_matches(expression: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    key, op = expression["key"], expression["operator"]
    values = list(expression.get("values") or [])
    if op == "In":
        return key in labels and labels[key] in values
    if op == "NotIn":
        return key not in labels or labels[key] not in values
    if op == "Exists":
        return key in labels
    if op == "DoesNotExist":
        return key not in labels
    raise ValueError(f"node selector operator {op!r} is not supported here")


def node_affinity_matches(terms: Sequence[NodeSelectorTerm], labels: Mapping[str, str]) -> bool:
    """Whether a node with `labels` satisfies a required node affinity (Kubernetes semantics:
    any term, all of its matchExpressions)."""
    return any(all(_expression_matches(e, labels) for e in term.get("matchExpressions", []))
               for term in terms)


def uses_nvidia_dra(fleet: Fleet, pool: NodePool) -> bool:
    klass = fleet.classes.get(pool.class_name or "")
    return klass is not None and any(d.claim == "DRA" and d.driver == NVIDIA_DRIVER for d in klass.spec.devices)


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
