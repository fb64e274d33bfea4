"""What a real node of a fleet cluster looks like to the Kubernetes API: its labels (per cluster
source), taints, allocatable resources, and the DRA devices its GPU driver publishes.

One home for these facts. The `sim` package creates kwok Nodes and ResourceSlices from them, and
contract tests compare them with what upstream components expect of real nodes (for example the
NVIDIA DRA driver's kubelet-plugin node affinity). Pure: no I/O, no Kubernetes client.

Label sources (checked with the search tool, 2026-11-30):
- every kubelet: `kubernetes.io/hostname`, `kubernetes.io/os`, `kubernetes.io/arch` and their
  deprecated `beta.kubernetes.io/*` twins (Kubernetes "Well-Known Labels, Annotations and Taints");
- clouds: `node.kubernetes.io/instance-type`, `topology.kubernetes.io/region`,
  `topology.kubernetes.io/zone`, set by the cloud provider (same page);
- EKS managed node groups: `eks.amazonaws.com/nodegroup`, `eks.amazonaws.com/nodegroup-image`,
  `eks.amazonaws.com/capacityType`, passed by the node group's bootstrap as kubelet
  `--node-labels` (EKS managed node group user data, as eksctl and the EKS Terraform modules
  reproduce it);
- GKE node pools: `cloud.google.com/gke-nodepool` (GKE node pool docs),
  `cloud.google.com/gke-accelerator` and `cloud.google.com/gke-accelerator-count` (GKE GPU docs
  and `kubectl describe node` of GPU nodes), and GKE's own GPU taint `nvidia.com/gpu=present:NoSchedule`
  ("GKE automatically taints the GPU nodes", GKE GPU docs);
- EKS and GKE, what this program's node groups / node pools set themselves: one home,
  modelplane.clouds.nodes (`provisioned_node_labels`: the pool label, `nvidia.com/gpu.present=true`
  on NVIDIA DRA pools, GKE's `gke-no-default-nvidia-gpu-device-plugin=true`;
  `provisioned_node_taints`: the EKS GPU taint; the system pool of every provisioned cluster,
  `SYSTEM_POOL_LABELS`, on the instance type the stack defaults to);
- Kind workers: only the kubelet labels plus the labels of the kind config, which this program sets
  to `modelplane.ai/pool` (components/sources/kind.py);
- Existing clusters: nobody sets `modelplane.ai/pool` (silent failure 6) unless the pool says
  `poolLabel: {mode: Present}`; with `mode: Apply` the nodes carry the selector's labels and the
  program's labelling Job adds the pool label.
Neither cloud sets Node Feature Discovery labels (`feature.node.kubernetes.io/pci-10de.present`):
those come from NFD / the GPU operator when installed, so no profile sets them; our node pools set
`nvidia.com/gpu.present=true`, which the NVIDIA DRA kubelet plugin's node affinity also accepts
(modelplane.clouds.nvidia).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from modelplane.api.fleet import Fleet
from modelplane.api.inference_class import DeviceKind, InferenceClass
from modelplane.api.inference_cluster import InferenceCluster, NodePool
from modelplane.clouds.aws import EFA_RESOURCE, SYSTEM_INSTANCE_TYPE, efa_mode, pool_efa_interfaces
from modelplane.clouds.gcp import SYSTEM_MACHINE_TYPE
from modelplane.clouds.nodes import (
    SYSTEM_POOL_LABELS,
    SYSTEM_POOL_NODES,
    ZONE_LABEL,
    provisioned_node_labels,
    provisioned_node_taints,
)
from modelplane.clouds.nvidia import GPU_TAINT
from modelplane.clouds.pcie import PCIE_TOPOLOGY
from modelplane.drivers import NVIDIA_GPU, published_attributes, published_capacity
from modelplane.vocabulary import ATTRIBUTE_PCIE_ROOT, DRANET_DRIVER, LABEL_POOL

KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node"
PROVISIONED = ("EKS", "GKE")
# The pool name of the system node group our EKS/GKE clusters get (not a fleet pool).
SYSTEM_POOL = "system"
EKS_DEFAULT_AMI_TYPE = "AL2023_x86_64_NVIDIA"

# vCPU and memory of the instance types the examples name (AWS EC2 / GCP machine-type pages);
# the sim publishes them as capacity and allocatable. Unknown types get DEFAULT_ALLOCATABLE.
INSTANCE_RESOURCES: dict[str, tuple[str, str]] = {
    SYSTEM_INSTANCE_TYPE: ("4", "16Gi"),
    SYSTEM_MACHINE_TYPE: ("4", "16Gi"),
    "p5.48xlarge": ("192", "2048Gi"),
    "p5en.48xlarge": ("192", "2048Gi"),
    "p4d.24xlarge": ("96", "1152Gi"),
    "a3-highgpu-8g": ("208", "1872Gi"),
    "a3-megagpu-8g": ("208", "1872Gi"),
    "a3-ultragpu-8g": ("224", "2952Gi"),
    "a2-ultragpu-4g": ("48", "680Gi"),
    "g2-standard-24": ("24", "96Gi"),
}
DEFAULT_ALLOCATABLE = ("16", "64Gi")
MAX_PODS = "110"  # the kubelet's default maxPods


@dataclass(frozen=True)
class NodeShape:
    """One node as the API sees it: name, labels, taints and allocatable resources."""

    name: str
    cluster: str
    pool: str              # the fleet pool; "" for a system or control-plane node (no fleet pool, no GPU)
    labels: dict[str, str]
    taints: list[dict[str, str]] = field(default_factory=list)
    allocatable: dict[str, str] = field(default_factory=dict)

    def manifest(self) -> dict[str, object]:
        """A v1 Node for a kwok-managed cluster, with status (capacity = allocatable) set on create."""
        spec: dict[str, object] = {"taints": [dict(t) for t in self.taints]} if self.taints else {}
        return {
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": self.name, "labels": dict(sorted(self.labels.items())),
                         "annotations": {KWOK_NODE_ANNOTATION: "fake"}},
            "spec": spec,
            "status": {"capacity": dict(self.allocatable), "allocatable": dict(self.allocatable)},
        }


def _class_of(fleet: Fleet, pool: NodePool) -> InferenceClass | None:
    return fleet.classes.get(pool.class_name) if pool.class_name else None


def _provisioned(cls: InferenceClass | None, provider: str) -> tuple[str | None, int]:
    """(instance or machine type, accelerator count) of a class provisioned on `provider`."""
    prov = cls.spec.provisioning if cls else None
    if prov is None or prov.provider != provider:
        return None, 0
    if provider == "EKS" and prov.eks is not None:
        return prov.eks.instance_type, prov.eks.accelerator.count
    if provider == "GKE" and prov.gke is not None:
        return prov.gke.machine_type, prov.gke.accelerator.count
    return None, 0


def _accelerator(cls: InferenceClass | None) -> str | None:
    prov = cls.spec.provisioning if cls else None
    if prov is not None and prov.provider == "GKE" and prov.gke is not None:
        return prov.gke.accelerator.type
    return None


def _digest(*parts: str, size: int = 8) -> str:
    return hashlib.sha256("/".join(parts).encode()).hexdigest()[:size]


def node_name(cluster: InferenceCluster, pool: str, index: int, ordinal: int) -> str:
    """A name shaped like the source's own (kind `<c>-worker2`, EKS `ip-…`, GKE `gke-…`) for node
    `index` of node pool `pool`. `ordinal` counts nodes across the cluster's pools (kind numbers
    workers cluster-wide)."""
    source, name = cluster.source, cluster.metadata.name
    if source == "Kind":
        return f"{name}-worker" + (str(ordinal + 1) if ordinal else "")
    if source == "EKS":
        h = int(_digest(name, pool, str(index)), 16)
        region = cluster.spec.cluster.eks.region if cluster.spec.cluster.eks else "us-east-1"
        return f"ip-10-{(h >> 16) % 256}-{(h >> 8) % 256}-{h % 256}.{region}.compute.internal"
    if source == "GKE":
        return f"gke-{name[:20]}-{pool[:15]}-{_digest(name, pool)}-{_digest(str(index), size=4)}"
    return f"{name}-{pool}-{index}"


def _cloud_labels(region: str | None, zone: str | None, first_zone_suffix: str,
                  instance: str | None) -> dict[str, str]:
    """The well-known labels a cloud provider sets: region, zone (the pool's, else the region's
    first zone, spelled `us-east-1a` on AWS and `us-central1-a` on GCP) and instance type."""
    labels = {}
    if region is not None:
        labels["topology.kubernetes.io/region"] = region
        labels[ZONE_LABEL] = zone or f"{region}{first_zone_suffix}"
    if instance:
        labels["node.kubernetes.io/instance-type"] = instance
    return labels


def _kubelet_labels(name: str) -> dict[str, str]:
    return {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
            "beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": "amd64"}


def _eks_labels(cluster: InferenceCluster, pool: str, instance: str | None, zone: str | None,
                capacity_type: str = "ON_DEMAND", ami_type: str = EKS_DEFAULT_AMI_TYPE) -> dict[str, str]:
    """What an EKS managed node group's nodes carry whatever this program asks for."""
    eks = cluster.spec.cluster.eks
    return {
        "eks.amazonaws.com/nodegroup": f"{cluster.metadata.name}-{pool}",
        "eks.amazonaws.com/nodegroup-image": f"ami-{_digest(ami_type, size=17)}",
        "eks.amazonaws.com/capacityType": capacity_type,
        **_cloud_labels(eks.region if eks else None, zone, "a", instance),
    }


def _gke_labels(cluster: InferenceCluster, pool: str, machine: str | None, zone: str | None) -> dict[str, str]:
    """What a GKE node pool's nodes carry whatever this program asks for."""
    gke = cluster.spec.cluster.gke
    return {"cloud.google.com/gke-nodepool": pool, **_cloud_labels(gke.region if gke else None, zone, "-a", machine)}


def source_labels(fleet: Fleet, cluster: InferenceCluster, pool: NodePool, name: str, index: int) -> dict[str, str]:
    """The labels a real node of this pool carries on this cluster's source (module docstring):
    the kubelet's, the source's own, and on EKS/GKE what our node pools set
    (modelplane.clouds.nodes.provisioned_node_labels)."""
    labels = _kubelet_labels(name)
    cls = _class_of(fleet, pool)
    source = cluster.source
    zone = pool.zones[index % len(pool.zones)] if pool.zones else None
    if source == "Kind":
        labels[LABEL_POOL] = pool.name
    elif source == "EKS":
        instance, _ = _provisioned(cls, "EKS")
        prov = cls.spec.provisioning.eks if cls and cls.spec.provisioning and cls.spec.provisioning.eks else None
        labels.update(_eks_labels(cluster, pool.name, instance, zone,
                                  "CAPACITY_BLOCK" if pool.capacity_block else "ON_DEMAND",
                                  prov.ami_type if prov and prov.ami_type else EKS_DEFAULT_AMI_TYPE))
        labels.update(provisioned_node_labels(fleet, cluster, pool))
    elif source == "GKE":
        machine, count = _provisioned(cls, "GKE")
        labels.update(_gke_labels(cluster, pool.name, machine, zone))
        accelerator = _accelerator(cls)
        if accelerator:
            labels["cloud.google.com/gke-accelerator"] = accelerator
            labels["cloud.google.com/gke-accelerator-count"] = str(count)
        labels.update(provisioned_node_labels(fleet, cluster, pool))
    elif source == "Existing":
        if pool.pool_label is not None and pool.pool_label.mode == "Present":
            labels[LABEL_POOL] = pool.name
        elif pool.pool_label is not None and pool.pool_label.node_selector is not None:
            labels.update(pool.pool_label.node_selector.match_labels)
    else:
        labels[LABEL_POOL] = pool.name  # other provisioned sources label their pools like EKS/GKE do
    return labels


def source_taints(cluster: InferenceCluster, pool: NodePool) -> list[dict[str, str]]:
    """Node taints this pool's nodes carry: the ones our EKS node groups declare
    (modelplane.clouds.nodes), and the GPU taint GKE puts on GPU nodes itself."""
    taints = provisioned_node_taints(cluster, pool)
    if cluster.source == "GKE" and pool.is_gpu_pool:
        taints.append(dict(GPU_TAINT))
    return taints


def _resources(instance: str | None) -> dict[str, str]:
    cpu, memory = INSTANCE_RESOURCES.get(instance or "", DEFAULT_ALLOCATABLE)
    return {"cpu": cpu, "memory": memory, "pods": MAX_PODS}


def allocatable(fleet: Fleet, cluster: InferenceCluster, pool: NodePool) -> dict[str, str]:
    """CPU and memory of the pool's instance type, and on an EKS EFA pool the EFA interfaces the
    EFA device plugin (installed on such clusters, modelplane.render.serving) advertises as
    `vpc.amazonaws.com/efa`, one per interface (modelplane.clouds.aws)."""
    cls = _class_of(fleet, pool)
    instance, _ = _provisioned(cls, cluster.source) if cluster.source in PROVISIONED else (None, 0)
    resources = _resources(instance)
    plugin = cluster.source == "EKS" and efa_mode(fleet, pool) == "device-plugin"
    efa = pool_efa_interfaces(fleet, pool) if plugin else None
    if efa:
        resources[EFA_RESOURCE] = str(efa)
    return resources


def system_nodes(cluster: InferenceCluster) -> list[NodeShape]:
    """The system node group (EKS) / node pool (GKE) every cluster we provision gets besides its
    GPU pools (components/sources): untainted, labelled `modelplane.ai/role=system`, on the
    default system instance type, in the zone of the first pool that names one. The gateways and
    other pods without a GPU run there. None on other sources."""
    if cluster.source not in PROVISIONED:
        return []
    zone = next((p.zones[0] for p in cluster.spec.node_pools if p.zones), None)
    instance = SYSTEM_INSTANCE_TYPE if cluster.source == "EKS" else SYSTEM_MACHINE_TYPE
    nodes = []
    for index in range(SYSTEM_POOL_NODES):
        name = node_name(cluster, SYSTEM_POOL, index, index)
        own = (_eks_labels(cluster, SYSTEM_POOL, instance, zone) if cluster.source == "EKS"
               else _gke_labels(cluster, SYSTEM_POOL, instance, zone))
        nodes.append(NodeShape(name, cluster.metadata.name, "", {**_kubelet_labels(name), **own,
                                                                **SYSTEM_POOL_LABELS}, [], _resources(instance)))
    return nodes


def kind_control_plane(cluster: InferenceCluster) -> list[NodeShape]:
    """A Kind cluster without worker pools (the kind stack's control cluster) runs its pods on its
    one node, the control plane: kind names it `<cluster>-control-plane`, labels it
    `node-role.kubernetes.io/control-plane` and removes the control-plane taint when there is no
    worker (kind's kubeadm config for single-node clusters). Clusters with workers schedule on the
    workers, so the control plane is not simulated there."""
    if cluster.source != "Kind" or cluster.spec.node_pools:
        return []
    name = f"{cluster.metadata.name}-control-plane"
    return [NodeShape(name, cluster.metadata.name, "", {**_kubelet_labels(name),
                                                        "node-role.kubernetes.io/control-plane": ""},
                      [], _resources(None))]


def cluster_nodes(fleet: Fleet, cluster: InferenceCluster) -> list[NodeShape]:
    """Every node of the cluster: `nodeCount` per pool (the declared count, not maxNodeCount),
    then the system nodes of a provisioned cluster, or the control plane of a Kind cluster
    without workers."""
    nodes: list[NodeShape] = []
    for pool in cluster.spec.node_pools:
        for index in range(pool.node_count):
            name = node_name(cluster, pool.name, index, len(nodes))
            nodes.append(NodeShape(name, cluster.metadata.name, pool.name,
                                   source_labels(fleet, cluster, pool, name, index),
                                   source_taints(cluster, pool), allocatable(fleet, cluster, pool)))
    return nodes + system_nodes(cluster) + kind_control_plane(cluster)


# ------------------------------------------------------------------------------------------- DRA devices

def published_devices(cls: InferenceClass, device: DeviceKind, node: str,
                      roots: list[str] | None = None) -> list[dict[str, object]]:
    """The ResourceSlice devices (resource.k8s.io/v1 shape) a node of this class publishes for one
    device kind: one device per GPU, named `gpu-<i>` as the drivers name them (`<kind>-<i>` when the
    class has several kinds), with the attributes and capacity its driver publishes
    (modelplane.drivers: what the real driver would publish for the identified product, whatever
    the class declares; a driver it does not model, the class's own attributes and capacity).
    `roots`: each device's PCIe root, where the instance type's topology is known (pcie_roots)."""
    out: list[dict[str, object]] = []
    for i in range(device.count):
        serial = _digest(node, device.name, str(i), size=32)
        attributes = published_attributes(cls, device, i, serial)
        if roots and i < len(roots):
            attributes[ATTRIBUTE_PCIE_ROOT] = {"string": roots[i]}
        out.append({"name": f"gpu-{i}" if len(cls.spec.devices) == 1 else f"{device.name}-{i}",
                    "attributes": attributes,
                    "capacity": published_capacity(cls, device)})
    return out


def pcie_roots(cls: InferenceClass) -> dict[str, list[str]]:
    """Device kind -> the PCIe root of each of its devices on one node, for a class whose GPUs
    pair with DRANET EFAs (one DRA GPU kind, one `dra.net` kind: what render/claims.py aligns
    under `matchAttribute: resource.kubernetes.io/pcieRoot`); empty for any other class. Both
    drivers publish that attribute (the NVIDIA DRA driver from sysfs, DRANET per interface), and
    the roots are the instance type's real ones (modelplane.clouds.pcie, from karpenter-provider-
    aws's scraped DRA metadata): on g6e.48xlarge no GPU shares a root with an EFA, so a claim
    aligning them stays Pending here as it would on EC2. A type whose topology is not sourced
    publishes no root (the scheduler refuses aligning claims there: nothing is guessed)."""
    dra = [d for d in cls.spec.devices if d.claim == "DRA"]
    efa = [d for d in dra if d.driver == DRANET_DRIVER]
    gpus = [d for d in dra if d.driver != DRANET_DRIVER]
    prov = cls.spec.provisioning
    topology = PCIE_TOPOLOGY.get(prov.eks.instance_type) if prov is not None and prov.eks is not None else None
    if len(efa) != 1 or len(gpus) != 1 or topology is None:
        return {}
    # A class declaring more devices than the type has: the extra ones carry no root.
    return {gpus[0].name: list(topology.gpus[:gpus[0].count]), efa[0].name: list(topology.efas[:efa[0].count])}


def resource_slices(fleet: Fleet, cluster: InferenceCluster, nodes: list[NodeShape]) -> list[dict[str, object]]:
    """One ResourceSlice per (node, driver) of DRA devices, pool = node name, as node-local drivers publish."""
    slices: list[dict[str, object]] = []
    for node in nodes:
        pool = cluster.pool(node.pool) if node.pool else None
        cls = _class_of(fleet, pool) if pool else None
        if cls is None:
            continue
        by_driver: dict[str, list[dict[str, object]]] = {}
        roots = pcie_roots(cls)
        for device in cls.spec.devices:
            if device.claim == "DRA":
                by_driver.setdefault(device.driver, []).extend(
                    published_devices(cls, device, node.name, roots.get(device.name, [])))
        for driver, devices in sorted(by_driver.items()):
            slices.append({
                "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                "metadata": {"name": f"{node.name[:200]}-{driver}".replace("_", "-")},
                "spec": {"driver": driver, "nodeName": node.name,
                         "pool": {"name": node.name, "generation": 1, "resourceSliceCount": 1},
                         "devices": devices},
            })
    return slices


def device_classes(fleet: Fleet, cluster: InferenceCluster) -> list[dict[str, object]]:
    """The DeviceClasses the drivers of this cluster's classes install (named after the class's
    deviceClassName, selecting the driver; the NVIDIA chart's gpu.nvidia.com also selects type 'gpu',
    its full GPUs)."""
    wanted: dict[str, str] = {}
    for pool in cluster.spec.node_pools:
        cls = _class_of(fleet, pool)
        for device in cls.spec.devices if cls else []:
            if device.claim == "DRA" and device.device_class_name:
                wanted.setdefault(device.device_class_name, device.driver)
    out: list[dict[str, object]] = []
    for name, driver in sorted(wanted.items()):
        expression = f"device.driver == '{driver}'"
        if driver == NVIDIA_GPU.driver and name == NVIDIA_GPU.device_class:
            expression += f" && device.attributes['{driver}'].type == '{NVIDIA_GPU.attributes['type'].fixed}'"
        out.append({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name},
                    "spec": {"selectors": [{"cel": {"expression": expression}}]}})
    return out
