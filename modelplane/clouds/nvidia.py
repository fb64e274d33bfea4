"""NVIDIA GPU facts every layer reads (no dependency on the renderers): the DRA driver's
kubelet-plugin node affinity and the node labels that satisfy it.

The driver chart's kubelet plugin (the DaemonSet that publishes ResourceSlices) has a
*required* node affinity: one of Node Feature Discovery's NVIDIA PCI labels, NFD's NVIDIA
CPU vendor label, or the GPU Operator's `nvidia.com/gpu.present=true`
(kubernetes-sigs/dra-driver-nvidia-gpu, deployments/helm/dra-driver-nvidia-gpu/values.yaml,
`kubeletPlugin.affinity`). Neither EKS nor GKE sets any of them, and we install neither NFD
nor the GPU Operator, so the nodes we provision or label carry `nvidia.com/gpu.present=true`.

GKE additionally needs `gke-no-default-nvidia-gpu-device-plugin=true` on DRA GPU pools
("Prepare GKE infrastructure for DRA workloads",
https://cloud.google.com/kubernetes-engine/docs/how-to/set-up-dra).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from modelplane.api import Fleet, NodePool
from modelplane.json_types import JsonMapping, JsonObject
from modelplane.vocabulary import NVIDIA_DRIVER

GPU_PRESENT_LABEL = "nvidia.com/gpu.present"
GKE_NO_DEFAULT_DEVICE_PLUGIN = "gke-no-default-nvidia-gpu-device-plugin"
GPU_TAINT_KEY = "nvidia.com/gpu"
# The taint our EKS GPU node groups declare; GKE puts the same key on GPU nodes itself.
GPU_TAINT = {"key": GPU_TAINT_KEY, "value": "present", "effect": "NoSchedule"}
# What tolerates it: our GPU pods, the EFA device plugin and the DRA driver's kubelet plugin
# (the chart's default `kubeletPlugin.tolerations` is exactly this one, values.yaml above).
GPU_TOLERATION = {"key": GPU_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}
DRA_KUBELET_PLUGIN_TOLERATIONS: tuple[dict[str, str], ...] = (GPU_TOLERATION,)

NodeSelectorTerm = JsonMapping


def _term(key: str, value: str) -> JsonObject:
    return {"matchExpressions": [{"key": key, "operator": "In", "values": [value]}]}


# kubeletPlugin.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution
# .nodeSelectorTerms of the chart's values.yaml (terms are ORed, expressions ANDed).
DRA_KUBELET_PLUGIN_NODE_SELECTOR_TERMS: tuple[JsonObject, ...] = (
    _term("feature.node.kubernetes.io/pci-10de.present", "true"),
    _term("feature.node.kubernetes.io/pci-0302_10de.present", "true"),
    _term("feature.node.kubernetes.io/pci-0300_10de.present", "true"),
    _term("feature.node.kubernetes.io/cpu-model.vendor_id", "NVIDIA"),
    _term(GPU_PRESENT_LABEL, "true"),
)


def _expression_matches(expression: JsonMapping, labels: Mapping[str, str]) -> bool:
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
