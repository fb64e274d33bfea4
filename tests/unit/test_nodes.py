"""modelplane.nodes: the labels, taints and DRA devices a real node of each cluster source has
(the profiles the simulated clusters publish; docs/sim.md cites where each comes from)."""

from __future__ import annotations

from pathlib import Path

import pytest

from modelplane.api import load_manifest_text, load_manifests
from modelplane.nodes import GPU_TAINT, cluster_nodes, device_classes, published_devices, resource_slices

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
    nodes = cluster_nodes(fleet, fleet.clusters["aws-us-east"])
    assert len(nodes) == 2  # nodeCount
    labels = only_labels(nodes[0].labels)
    assert labels.pop("eks.amazonaws.com/nodegroup-image").startswith("ami-")
    assert labels == {
        "eks.amazonaws.com/nodegroup": "aws-us-east-h100-efa", "eks.amazonaws.com/capacityType": "ON_DEMAND",
        "node.kubernetes.io/instance-type": "p5.48xlarge", "topology.kubernetes.io/region": "us-east-1",
        "topology.kubernetes.io/zone": "us-east-1a", POOL: "h100-efa"}
    assert nodes[0].name.startswith("ip-10-") and nodes[0].name.endswith(".us-east-1.compute.internal")
    assert nodes[0].taints == [GPU_TAINT] == [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
    assert nodes[0].allocatable == {"cpu": "192", "memory": "2048Gi", "pods": "110"}
    # declared nodeCount, not maxNodeCount
    assert len(cluster_nodes(fleet, fleet.clusters["aws-us-west"])) == 1


def test_gke_nodes_carry_the_node_pool_and_accelerator_labels() -> None:
    fleet = load_manifests(REPO / "examples" / "gcp")
    nodes = cluster_nodes(fleet, fleet.clusters["gcp-us-central"])
    assert len(nodes) == 2
    assert only_labels(nodes[1].labels) == {
        "cloud.google.com/gke-nodepool": "h200", "cloud.google.com/gke-accelerator": "nvidia-h200-141gb",
        "cloud.google.com/gke-accelerator-count": "8", "node.kubernetes.io/instance-type": "a3-ultragpu-8g",
        "topology.kubernetes.io/region": "us-central1", "topology.kubernetes.io/zone": "us-central1-b", POOL: "h200"}
    assert nodes[0].name.startswith("gke-gcp-us-central-h200-")
    assert nodes[0].taints == [GPU_TAINT]


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
