"""modelplane.node_objects: the labels, taints and DRA devices a real node of each cluster source has
(the profiles the simulated clusters publish; docs/sim.md cites where each comes from)."""

from __future__ import annotations

from pathlib import Path

import pytest

from modelplane.api import load_manifest_text, load_manifests
from modelplane.clouds.nodes import SYSTEM_POOL_LABELS, provisioned_node_labels
from modelplane.node_objects import GPU_TAINT, cluster_nodes, device_classes, published_devices, resource_slices

REPO = Path(__file__).resolve().parents[2]
POOL = "modelplane.ai/pool"
KUBELET = {"kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
           "beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": "amd64"}

H100_CLASS = """\
apiVersion: modelplane.ai/v1alpha1
kind: InferenceClass
metadata: {name: h100}
spec:
  devices:
  - name: gpu
    driver: gpu.nvidia.com
    deviceClassName: gpu.nvidia.com
    count: 2
    attributes: {productName: {string: NVIDIA H100 80GB HBM3}}
    capacity: {memory: {value: %s}}
"""


def existing(pool_label: str) -> str:
    return H100_CLASS % "81559Mi" + f"""---
apiVersion: modelplane.ai/v1alpha1
kind: InferenceCluster
metadata: {{name: byo}}
spec:
  cluster: {{source: Existing, existing: {{}}}}
  nodePools: [{{name: a, className: h100, nodeCount: 1{pool_label}}}]
"""


def only_labels(node_labels: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in node_labels.items() if k not in KUBELET and k != "kubernetes.io/hostname"}


def test_kind_workers_carry_only_the_pool_label_and_no_taint() -> None:
    fleet = load_manifests(REPO / "examples" / "kind")
    (node,) = cluster_nodes(fleet, fleet.clusters["eu-west"])
    assert node.name == "eu-west-worker"
    assert only_labels(node.labels) == {POOL: "gpu"}
    assert node.labels["kubernetes.io/hostname"] == "eu-west-worker"
    assert node.taints == []


def test_eks_nodes_carry_the_managed_node_group_labels_and_the_gpu_taint() -> None:
    fleet = load_manifests(REPO / "examples" / "aws")
    cluster = fleet.clusters["aws-us-east"]
    nodes = cluster_nodes(fleet, cluster)
    gpu = [n for n in nodes if n.pool]
    assert len(gpu) == 2  # nodeCount
    labels = only_labels(gpu[0].labels)
    assert labels.pop("eks.amazonaws.com/nodegroup-image").startswith("ami-")
    assert labels == {
        "eks.amazonaws.com/nodegroup": "aws-us-east-h100-efa", "eks.amazonaws.com/capacityType": "ON_DEMAND",
        "node.kubernetes.io/instance-type": "p5.48xlarge", "topology.kubernetes.io/region": "us-east-1",
        "topology.kubernetes.io/zone": "us-east-1a", POOL: "h100-efa", "nvidia.com/gpu.present": "true",
        "modelplane.ai/efa": "device-plugin"}
    # what our node group sets, from its one home
    assert provisioned_node_labels(fleet, cluster, cluster.gpu_pools[0]).items() <= gpu[0].labels.items()
    assert gpu[0].name.startswith("ip-10-") and gpu[0].name.endswith(".us-east-1.compute.internal")
    assert gpu[0].taints == [GPU_TAINT] == [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
    # p5.48xlarge; its EFA pool's 32 interfaces, as the EFA device plugin advertises them
    assert gpu[0].allocatable == {"cpu": "192", "memory": "2048Gi", "pods": "110", "vpc.amazonaws.com/efa": "32"}
    west = load_manifests(REPO / "examples" / "aws").clusters["aws-us-west"]
    assert "vpc.amazonaws.com/efa" not in cluster_nodes(fleet, west)[0].allocatable  # no EFA fabric there
    # declared nodeCount, not maxNodeCount (+ the system node)
    assert len(cluster_nodes(fleet, fleet.clusters["aws-us-west"])) == 2


def test_gke_nodes_carry_the_node_pool_accelerator_and_dra_labels() -> None:
    fleet = load_manifests(REPO / "examples" / "gcp")
    nodes = [n for n in cluster_nodes(fleet, fleet.clusters["gcp-us-central"]) if n.pool]
    assert len(nodes) == 2
    assert only_labels(nodes[1].labels) == {
        "cloud.google.com/gke-nodepool": "h200", "cloud.google.com/gke-accelerator": "nvidia-h200-141gb",
        "cloud.google.com/gke-accelerator-count": "8", "node.kubernetes.io/instance-type": "a3-ultragpu-8g",
        "topology.kubernetes.io/region": "us-central1", "topology.kubernetes.io/zone": "us-central1-b", POOL: "h200",
        "nvidia.com/gpu.present": "true", "gke-no-default-nvidia-gpu-device-plugin": "true"}
    assert nodes[0].name.startswith("gke-gcp-us-central-h200-")
    assert nodes[0].taints == [GPU_TAINT]


@pytest.mark.parametrize(("example", "cluster", "own"), [
    pytest.param("aws", "aws-us-east", {"eks.amazonaws.com/nodegroup": "aws-us-east-system",
                                        "eks.amazonaws.com/capacityType": "ON_DEMAND",
                                        "node.kubernetes.io/instance-type": "m6i.xlarge",
                                        "topology.kubernetes.io/region": "us-east-1",
                                        "topology.kubernetes.io/zone": "us-east-1a"}, id="EKS system node group"),
    pytest.param("gcp", "gcp-us-central", {"cloud.google.com/gke-nodepool": "system",
                                           "node.kubernetes.io/instance-type": "e2-standard-4",
                                           "topology.kubernetes.io/region": "us-central1",
                                           "topology.kubernetes.io/zone": "us-central1-b"}, id="GKE system pool"),
])
def test_provisioned_clusters_have_one_untainted_system_node(example: str, cluster: str, own: dict[str, str]) -> None:
    """Our EKS and GKE clusters get a system pool besides the GPU pools (components/sources); the
    gateways run there, since every GPU node is tainted."""
    fleet = load_manifests(REPO / "examples" / example)
    (system,) = [n for n in cluster_nodes(fleet, fleet.clusters[cluster]) if not n.pool]
    labels = only_labels(system.labels)
    labels.pop("eks.amazonaws.com/nodegroup-image", None)
    assert labels == {**own, **SYSTEM_POOL_LABELS} and SYSTEM_POOL_LABELS == {"modelplane.ai/role": "system"}
    assert system.taints == []
    assert system.allocatable == {"cpu": "4", "memory": "16Gi", "pods": "110"}
    assert [s for s in resource_slices(fleet, fleet.clusters[cluster], [system])] == []


def test_kind_and_existing_clusters_have_no_system_node() -> None:
    fleet = load_manifests(REPO / "examples" / "kind")
    assert all(n.pool for n in cluster_nodes(fleet, fleet.clusters["eu-west"]))
    byo = load_manifest_text(existing(""))
    assert all(n.pool for n in cluster_nodes(byo, byo.clusters["byo"]))


def test_a_kind_cluster_without_workers_schedules_on_its_control_plane() -> None:
    """The kind stack's control cluster: one node, kind's `<name>-control-plane`, untainted."""
    fleet = load_manifest_text("apiVersion: modelplane.ai/v1alpha1\nkind: InferenceCluster\n"
                               "metadata: {name: control}\nspec: {cluster: {source: Kind, kind: {}}}\n")
    (node,) = cluster_nodes(fleet, fleet.clusters["control"])
    assert node.name == "control-control-plane" and node.pool == "" and node.taints == []
    assert only_labels(node.labels) == {"node-role.kubernetes.io/control-plane": ""}


@pytest.mark.parametrize(("pool_label", "want"), [
    pytest.param("", {}, id="no poolLabel: nobody labels the nodes (silent failure 6)"),
    pytest.param(", poolLabel: {mode: Present}", {POOL: "a"}, id="Present: the nodes already carry it"),
    pytest.param(", poolLabel: {mode: Apply, nodeSelector: {matchLabels: {node.kubernetes.io/instance-type: x}}}",
                 {"node.kubernetes.io/instance-type": "x"}, id="Apply: the selector's labels, the Job adds the pool"),
])
def test_existing_nodes(pool_label: str, want: dict[str, str]) -> None:
    fleet = load_manifest_text(existing(pool_label))
    (node,) = cluster_nodes(fleet, fleet.clusters["byo"])
    assert only_labels(node.labels) == want
    assert node.taints == []


@pytest.mark.parametrize("declared", ["81559Mi", "80Gi"])
def test_nvidia_devices_publish_the_usable_memory_whatever_the_class_declares(declared: str) -> None:
    """The gotcha: a class declaring 80Gi for an H100 still meets devices of 81559Mi."""
    fleet = load_manifest_text(H100_CLASS % declared)
    cls = fleet.classes["h100"]
    devices = published_devices(cls, cls.spec.devices[0], "node-a")
    assert [d["name"] for d in devices] == ["gpu-0", "gpu-1"]
    assert [d["capacity"] for d in devices] == [{"memory": {"value": "81559Mi"}}] * 2
    attrs = devices[0]["attributes"]
    assert attrs["productName"] == {"string": "NVIDIA H100 80GB HBM3"}
    assert attrs["architecture"] == {"string": "Hopper"}
    assert attrs["cudaComputeCapability"] == {"version": "9.0.0"}
    assert attrs["type"] == {"string": "gpu"}
    assert set(attrs) == {"type", "uuid", "productName", "brand", "architecture", "cudaComputeCapability",
                          "driverVersion", "cudaDriverVersion", "resource.kubernetes.io/pciBusID"}
    # stable per node, distinct per device
    again = published_devices(cls, cls.spec.devices[0], "node-a")
    assert devices == again
    assert devices[0]["attributes"]["uuid"] != devices[1]["attributes"]["uuid"]


DEVICE = """\
apiVersion: modelplane.ai/v1alpha1
kind: InferenceClass
metadata: {name: c}
spec:%s
  devices:
  - {name: gpu, driver: %s, deviceClassName: %s, count: 1, attributes: {%s}, capacity: {%s}}
"""
P5 = ("\n  provisioning: {provider: EKS, eks: {instanceType: p5.48xlarge, "
      "accelerator: {type: nvidia-h100-80gb, count: 8}}}")
NVIDIA = ("gpu.nvidia.com", "gpu.nvidia.com")
EXAMPLE = ("gpu.example.com", "gpu.example.com")


@pytest.mark.parametrize(("provisioning", "driver", "attributes", "capacity", "want_attributes", "want_capacity"), [
    pytest.param(P5, NVIDIA, "productName: {string: H100}", "memory: {value: 80Gi}",
                 {"productName": {"string": "NVIDIA H100 80GB HBM3"}, "architecture": {"string": "Hopper"},
                  "cudaComputeCapability": {"version": "9.0.0"}}, {"memory": {"value": "81559Mi"}},
                 id="an identified product publishes NVML's name, architecture and memory, whatever the class says"),
    pytest.param("", NVIDIA, "productName: {string: NVIDIA H100 80GB HBM3}, architecture: {string: Ampere}, "
                 "cudaComputeCapability: {version: 8.0.0}", "memory: {value: 81559Mi}",
                 {"architecture": {"string": "Hopper"}, "cudaComputeCapability": {"version": "9.0.0"}}, {},
                 id="an identified product's architecture and compute capability, not the declared ones"),
    pytest.param("", NVIDIA, "productName: {string: NVIDIA A100 80GB PCIe}", "memory: {value: 80Gi}",
                 {"productName": {"string": "NVIDIA A100 80GB PCIe"}, "architecture": {"string": "Ampere"}}, {},
                 id="the variant the class names when it is one of the product's NVML names"),
    pytest.param("", NVIDIA, "productName: {string: Custom GPU}, architecture: {string: Hopper}, "
                 "driverVersion: {version: 550.54.15}", "memory: {value: 40Gi}",
                 {"productName": {"string": "Custom GPU"}, "architecture": {"string": "Hopper"},
                  "driverVersion": {"version": "550.54.15"}, "cudaDriverVersion": {"version": "13.0.0"}},
                 {"memory": {"value": "40Gi"}},
                 id="an unidentified product and the host driver stack: what the class declares"),
    pytest.param("", NVIDIA, "computeCapability: {version: 9.0.0}, addressingMode: {string: ATS}, "
                 "driverVersion: {string: '580'}", "memory: {value: 40Gi}, bandwidth: {value: 1T}",
                 {"computeCapability": None, "addressingMode": {"string": "ATS"},
                  "driverVersion": {"version": "580.126.20"}}, {"bandwidth": None},
                 id="keys the driver never publishes are not published; a value of another type is not used"),
    pytest.param("", EXAMPLE, "model: {string: H100}, productName: {string: H100}", "memory: {value: 40Gi}",
                 {"model": {"string": "LATEST-GPU-MODEL"}, "driverVersion": {"version": "1.0.0"},
                  "index": {"int": 0}, "productName": None},
                 {"memory": {"value": "80Gi"}, "compute": {"value": "100"}},
                 id="the example driver publishes its fixed values"),
    pytest.param("", ("gpu.nvidia.com", "mig.nvidia.com"), "profile: {string: 1g.10gb}", "memory: {value: 10Gi}",
                 {"profile": {"string": "1g.10gb"}, "type": None}, {"memory": {"value": "10Gi"}},
                 id="device classes the sim does not model: the class verbatim"),
])
def test_published_devices_are_what_the_driver_would_publish(provisioning, driver, attributes, capacity,
                                                             want_attributes, want_capacity) -> None:
    fleet = load_manifest_text(DEVICE % (provisioning, *driver, attributes, capacity))
    cls = fleet.classes["c"]
    (device,) = published_devices(cls, cls.spec.devices[0], "node-a")
    assert {k: device["attributes"].get(k) for k in want_attributes} == want_attributes, device
    assert {k: device["capacity"].get(k) for k in want_capacity} == want_capacity, device


def test_only_the_nvidia_charts_gpu_device_class_selects_full_gpus() -> None:
    mig = DEVICE.replace("name: c", "name: m") % ("", "gpu.nvidia.com", "mig.nvidia.com", "", "memory: {value: 10Gi}")
    fleet = load_manifest_text(DEVICE % ("", *NVIDIA, "", "memory: {value: 40Gi}") + "---\n" + mig + """---
apiVersion: modelplane.ai/v1alpha1
kind: InferenceCluster
metadata: {name: byo}
spec:
  cluster: {source: Existing, existing: {}}
  nodePools: [{name: a, className: c, nodeCount: 1}, {name: b, className: m, nodeCount: 1}]
""")
    assert {c["metadata"]["name"]: c["spec"]["selectors"][0]["cel"]["expression"]
            for c in device_classes(fleet, fleet.clusters["byo"])} == {
        "gpu.nvidia.com": "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'",
        "mig.nvidia.com": "device.driver == 'gpu.nvidia.com'"}


def test_gke_class_without_product_attribute_is_identified_by_its_accelerator() -> None:
    fleet = load_manifests(REPO / "examples" / "gcp")
    cls = fleet.classes["h200-gke"]
    devices = published_devices(cls, cls.spec.devices[0], "n")
    assert len(devices) == 8
    assert devices[0]["capacity"] == {"memory": {"value": "143771Mi"}}
    assert devices[0]["attributes"]["productName"] == {"string": "NVIDIA H200"}


def test_example_driver_slices_and_classes() -> None:
    fleet = load_manifests(REPO / "examples" / "kind")
    cluster = fleet.clusters["us-east"]
    nodes = cluster_nodes(fleet, cluster)
    (rs,) = resource_slices(fleet, cluster, nodes)
    spec = rs["spec"]
    assert spec["driver"] == "gpu.example.com"
    assert spec["nodeName"] == spec["pool"]["name"] == "us-east-worker"
    (device,) = spec["devices"]
    assert device["capacity"] == {"memory": {"value": "80Gi"}, "compute": {"value": "100"}}
    assert device["attributes"]["model"] == {"string": "LATEST-GPU-MODEL"}
    assert device_classes(fleet, cluster) == [{
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu.example.com"},
        "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.example.com'"}}]}}]


def _devices(*kinds: str) -> str:
    return "\n".join(f"  - {k}" for k in kinds)


P5EN_GPUS = [f"pci0000:{b}" for b in ("44", "44", "5d", "5d", "76", "76", "8f", "8f")]
P5EN_EFAS = [f"pci0000:{b}" for b in ("44", "5d", "76", "8f") for _ in range(4)]
G6E_GPUS = [f"pci0000:{b}" for b in ("9d", "9f", "a1", "a3", "c5", "c7", "c9", "cb")]
G6E_EFAS = [f"pci0000:{b}" for b in ("84", "84", "a5", "a5")]


@pytest.mark.parametrize("instance, devices, roots", [
    pytest.param("p5en.48xlarge",
                 _devices("{name: gpu, driver: gpu.nvidia.com, deviceClassName: gpu.nvidia.com, count: 8}",
                          "{name: efa, driver: dra.net, deviceClassName: efa.networking.k8s.aws, count: 16}"),
                 {"gpu": P5EN_GPUS, "efa": P5EN_EFAS}, id="p5en-two-gpus-and-four-efas-a-root"),
    pytest.param("g6e.48xlarge",
                 _devices("{name: gpu, driver: gpu.nvidia.com, deviceClassName: gpu.nvidia.com, count: 8}",
                          "{name: efa, driver: dra.net, deviceClassName: efa.networking.k8s.aws, count: 4}"),
                 {"gpu": G6E_GPUS, "efa": G6E_EFAS}, id="g6e-no-gpu-shares-a-root-with-an-efa"),
    pytest.param("p9.fictional",
                 _devices("{name: gpu, driver: gpu.nvidia.com, deviceClassName: gpu.nvidia.com, count: 8}",
                          "{name: efa, driver: dra.net, deviceClassName: efa.networking.k8s.aws, count: 4}"),
                 {}, id="unsourced-type-publishes-no-root"),
    pytest.param("p5en.48xlarge",
                 _devices("{name: gpu, driver: gpu.nvidia.com, deviceClassName: gpu.nvidia.com, count: 8}"),
                 {}, id="no-dranet-efa"),
    pytest.param("p5en.48xlarge",
                 _devices("{name: gpu, driver: gpu.nvidia.com, deviceClassName: gpu.nvidia.com, count: 8}",
                          "{name: gpu2, driver: gpu.example.com, deviceClassName: gpu.example.com, count: 8}",
                          "{name: efa, driver: dra.net, deviceClassName: efa.networking.k8s.aws, count: 16}"),
                 {}, id="two-gpu-kinds-pair-with-nothing"),
])
def test_the_sim_publishes_the_pcie_roots_the_instance_type_really_has(instance: str, devices: str, roots) -> None:
    """aws/karpenter-provider-aws pkg/providers/drametadata/zz_generated_gpu_metadata.go and
    zz_generated_efa_metadata.go list `resource.kubernetes.io/pcieRoot` of every GPU (NVIDIA DRA
    driver) and every EFA (DRANET) per instance type: p5en puts two GPUs and four EFAs under each
    of four roots, g6e.48xlarge no GPU under any EFA's root. The sim's nodes publish exactly those
    (the allocator refuses a device without the attribute, so it decides whether an aligned claim
    can be allocated at all), never a topology derived from the counts the class declares."""
    from modelplane.node_objects import pcie_roots

    cls = load_manifest_text(f"""
apiVersion: modelplane.ai/v1alpha1
kind: InferenceClass
metadata: {{name: c}}
spec:
  provisioning: {{provider: EKS, eks: {{instanceType: {instance}, accelerator: {{type: nvidia-h200, count: 8}}}}}}
  devices:
{devices}
""").classes["c"]
    assert pcie_roots(cls) == roots
    for kind, want in roots.items():
        device = next(d for d in cls.spec.devices if d.name == kind)
        got = [d["attributes"]["resource.kubernetes.io/pcieRoot"]["string"]
               for d in published_devices(cls, device, "n1", want)]
        assert got == want
