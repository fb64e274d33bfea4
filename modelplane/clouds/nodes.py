"""The labels and taints our provisioned (EKS/GKE) node pools carry: one system pool per
cluster (the gateways, the drivers' controllers and everything else without a GPU run there)
and one GPU pool per fleet pool. The NVIDIA DRA kubelet plugin's affinity the GPU pools must
satisfy is in modelplane.clouds.nvidia; the simulated clusters (modelplane.node_objects) build their
EKS/GKE nodes from these."""

from __future__ import annotations

from collections.abc import Sequence

from modelplane.api import Fleet, InferenceCluster, NodePool
from modelplane.json_types import JsonObject
from modelplane.vocabulary import LABEL_EFA, LABEL_POOL, LABEL_ROLE

from .aws import efa_mode
from .nvidia import GKE_NO_DEFAULT_DEVICE_PLUGIN, GPU_PRESENT_LABEL, GPU_TAINT, uses_nvidia_dra

ZONE_LABEL = "topology.kubernetes.io/zone"
# Sources whose every node carries ZONE_LABEL: the cloud's node controller sets it (Kubernetes
# "Well-Known Labels, Annotations and Taints"; modelplane.node_objects builds the sim's EKS and GKE nodes
# with it). Kind nodes have none, and nothing promises it on an Existing cluster's.
ZONE_LABELLED_SOURCES = ("EKS", "GKE")

# The system node group (EKS) / node pool (GKE) of every cluster we provision: its labels and
# the nodes it starts with (EKS scaling desired 1 of 1..2; GKE 1 node, autoscaled 1..2).
SYSTEM_POOL_LABELS = {LABEL_ROLE: "system"}
SYSTEM_POOL_NODES = 1
SYSTEM_POOL_MAX_NODES = 2


def provisioned_node_labels(fleet: Fleet, cluster: InferenceCluster, pool: NodePool) -> dict[str, str]:
    """The Kubernetes labels our EKS node group / GKE node pool for `pool` sets on its nodes
    (besides the ones the cloud sets itself). Empty for sources we do not provision."""
    if cluster.source not in ("EKS", "GKE"):
        return {}
    labels = {LABEL_POOL: pool.name}
    mode = efa_mode(fleet, pool)
    if mode is not None:
        labels[LABEL_EFA] = mode        # which EFA driver's DaemonSet runs here (render.serving)
    if uses_nvidia_dra(fleet, pool):
        labels[GPU_PRESENT_LABEL] = "true"
        if cluster.source == "GKE":
            labels[GKE_NO_DEFAULT_DEVICE_PLUGIN] = "true"
    return labels


def gang_zone_affinity(cluster: InferenceCluster, workload_label: str, workload: str, gang_index_key: str,
                       zones: Sequence[str] = ()) -> JsonObject | None:
    """The affinity that keeps every pod of one gang copy in one zone, and the copies in the
    zones the plan charged for them (`zones`: EnginePlacement.zones, zone of copy c at c), on
    sources whose nodes carry the zone label (None elsewhere: a term whose topology key a node
    lacks filters the node out).

    * A required pod affinity: the pods of a copy are the workload's pods with the same gang
      index (`matchLabelKeys`, merged into the selector by the API server at pod creation,
      KEP-3633); the first pod of a copy matches its own term (kube-scheduler InterPodAffinity
      `satisfyPodAffinity`), so it lands in any zone the rest allows and the rest follow it.
    * With planned zones, a required node affinity `zone In <planned zones>`: one workload's
      copies share a template, so no copy can be pinned to its own zone, but none leaves the
      zones the plan charged.
    * When every copy has a zone of its own (as many distinct zones as copies), a required pod
      anti-affinity on the other copies' pods (`mismatchLabelKeys`: the gang index `notin` the
      pod's own): two copies never share a zone. Without it the copies' first pods (the LWS
      leaders, created before any worker) may take one zone together, and each copy's workers,
      bound to their leader's zone, wait there for room the plan put in the other zone.
      Where zones repeat (3 copies over 2 zones) no such term holds the plan's counts, so only
      the zone set is kept and kube-scheduler decides which copies share a zone."""
    if cluster.source not in ZONE_LABELLED_SOURCES:
        return None
    copy = {"labelSelector": {"matchLabels": {workload_label: workload}}, "matchLabelKeys": [gang_index_key],
            "topologyKey": ZONE_LABEL}
    affinity: JsonObject = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [copy]}}
    planned = sorted(set(zones))
    if planned:
        zone_in = {"key": ZONE_LABEL, "operator": "In", "values": planned}
        affinity["nodeAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [zone_in]}]}}
    if len(zones) > 1 and len(planned) == len(zones):
        others = {"labelSelector": {"matchLabels": {workload_label: workload}},
                  "mismatchLabelKeys": [gang_index_key], "topologyKey": ZONE_LABEL}
        affinity["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [others]}
    return affinity


def provisioned_node_taints(cluster: InferenceCluster, pool: NodePool) -> list[dict[str, str]]:
    """Taints our EKS GPU node groups declare (GKE taints GPU nodes itself, same key)."""
    if cluster.source == "EKS" and pool.is_gpu_pool:
        return [dict(GPU_TAINT)]
    return []
