"""Simulated clusters on real control planes: what `sim up` creates, and what the real
kube-scheduler, kube-controller-manager, kwok and LeaderWorkerSet controller do with it."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from modelplane.api import load_manifests
from modelplane.node_objects import cluster_nodes, device_classes, resource_slices
from sim import KubeClient, SimFleet, SimTools
from sim.fleet import port_listening

from .conftest import REPO, processes_mentioning
from .stack import assert_kubelet_plugin_runs_on_the_gpu_nodes_only, scheduler_said, wait_for

pytestmark = pytest.mark.sim

AWS = REPO / "examples" / "aws"
POOL = "modelplane.ai/pool"


def sim_cli(*args: str, timeout: float = 240.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "modelplane", "sim", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=timeout, check=False)


@pytest.fixture(scope="module")
def aws_sim(module_fleet: Any) -> tuple[SimFleet, dict[str, Path]]:
    """The EKS-shaped fleet of examples/aws, started once for this module."""
    started: tuple[SimFleet, dict[str, Path]] = module_fleet(AWS)
    return started


@pytest.fixture(scope="module")
def east(aws_sim: tuple[SimFleet, dict[str, Path]]) -> Iterator[KubeClient]:
    with KubeClient.from_kubeconfig(aws_sim[1]["aws-us-east"]) as kube:
        yield kube


# ------------------------------------------------------------------------------------ kind, through the CLI

def test_kind_fleet_up_status_down_through_the_cli(sim_tools: SimTools, tmp_path: Path) -> None:
    """`sim up examples/kind` starts both regions with one Ready kwok node each, labelled with its
    pool, an 80Gi gpu.example.com device and its DeviceClass, and the control cluster the stacks put
    the control-plane gateway on; `status` lists them as running;
    `down` leaves no process, no listening port and no state directory."""
    state = tmp_path / "state"
    up = sim_cli("up", "examples/kind", "--state-dir", str(state))
    assert up.returncode == 0, up.stderr
    assert "3 simulated cluster(s) running" in up.stdout
    try:
        record = json.loads((state / "sim.json").read_text())
        # the fleet's two regions, and the stacks' control cluster (the InferenceGateway names none)
        assert sorted(record["clusters"]) == ["control", "eu-west", "us-east"]
        with KubeClient.from_kubeconfig(state / "control" / "kubeconfig") as kube:
            (node,) = kube.items("/api/v1/nodes")
            assert node["metadata"]["name"] == "control-control-plane" and not node["spec"].get("taints")
        for name in ("eu-west", "us-east"):
            with KubeClient.from_kubeconfig(state / name / "kubeconfig") as kube:
                assert kube.get("/version")["gitVersion"] == "v1.36.3"
                (node,) = kube.items("/api/v1/nodes")
                assert node["metadata"]["labels"][POOL] == "gpu"
                assert node["metadata"]["annotations"]["kwok.x-k8s.io/node"] == "fake"
                assert {c["type"]: c["status"] for c in node["status"]["conditions"]}["Ready"] == "True"
                (rs,) = kube.items("/apis/resource.k8s.io/v1/resourceslices")
                assert rs["spec"]["driver"] == "gpu.example.com"
                assert rs["spec"]["nodeName"] == node["metadata"]["name"]
                assert [d["capacity"]["memory"]["value"] for d in rs["spec"]["devices"]] == ["80Gi"]
                classes = kube.items("/apis/resource.k8s.io/v1/deviceclasses")
                assert [c["metadata"]["name"] for c in classes] == ["gpu.example.com"]
        status = sim_cli("status", "--state-dir", str(state), timeout=60)
        assert status.returncode == 0, status.stderr
        assert "eu-west: running" in status.stdout and "us-east: running" in status.stdout
        assert str(state / "eu-west" / "kubeconfig") in status.stdout
    finally:
        down = sim_cli("down", "--state-dir", str(state), timeout=120)
    assert down.returncode == 0, down.stderr
    assert "stopped 3 simulated cluster(s): control, eu-west, us-east" in down.stdout
    pids = [p["pid"] for c in record["clusters"].values() for p in c["processes"]]
    ports = [port for c in record["clusters"].values() for port in c["ports"].values()]
    assert len(pids) >= 10  # etcd, apiserver, controller-manager, scheduler, kwok per cluster
    assert not processes_mentioning(str(state))
    assert [p for p in ports if port_listening(p)] == []
    assert not state.exists()


# ------------------------------------------------------------------------------------ EKS-shaped fleet

def test_eks_nodes_carry_the_node_group_profile_and_publish_nvidia_devices(
        aws_sim: tuple[SimFleet, dict[str, Path]], east: KubeClient) -> None:
    """Nodes, slices and classes on the API server are exactly what modelplane.node_objects derives: EKS
    node-group labels, the GPU taint, p5.48xlarge allocatable, 8 H100s at the usable 81559Mi; and
    the untainted system node of the system node group."""
    fleet = load_manifests(AWS)
    cluster = fleet.clusters["aws-us-east"]
    want = cluster_nodes(fleet, cluster)
    nodes = {n["metadata"]["name"]: n for n in east.items("/api/v1/nodes")}
    assert sorted(nodes) == sorted(n.name for n in want)
    for shape in want:
        assert nodes[shape.name]["metadata"]["labels"] == shape.labels
    (system,) = [nodes[s.name] for s in want if not s.pool]
    assert system["metadata"]["labels"]["modelplane.ai/role"] == "system" and not system["spec"].get("taints")
    want = [shape for shape in want if shape.pool]
    for shape in want:
        node = nodes[shape.name]
        assert node["metadata"]["labels"]["eks.amazonaws.com/nodegroup"] == "aws-us-east-h100-efa"
        assert node["metadata"]["labels"]["node.kubernetes.io/instance-type"] == "p5.48xlarge"
        assert node["spec"]["taints"] == [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
        assert node["status"]["allocatable"]["cpu"] == "192"
    slices = {s["spec"]["nodeName"]: s for s in east.items("/apis/resource.k8s.io/v1/resourceslices")}
    for expected in resource_slices(fleet, cluster, want):
        got = slices[expected["spec"]["nodeName"]]["spec"]
        assert got["devices"] == expected["spec"]["devices"]
        assert len(got["devices"]) == 8
        assert {d["capacity"]["memory"]["value"] for d in got["devices"]} == {"81559Mi"}
        assert {d["attributes"]["productName"]["string"] for d in got["devices"]} == {"NVIDIA H100 80GB HBM3"}
    names = [c["metadata"]["name"] for c in east.items("/apis/resource.k8s.io/v1/deviceclasses")]
    assert names == [c["metadata"]["name"] for c in device_classes(fleet, cluster)] == ["gpu.nvidia.com"]
    # one pool of the other region: declared nodeCount (1), not maxNodeCount (2), + the system node
    with KubeClient.from_kubeconfig(aws_sim[1]["aws-us-west"]) as west:
        assert len(west.items("/api/v1/nodes", {"labelSelector": POOL})) == 1


def _gpu_workload(kube: KubeClient, name: str, memory: str) -> None:
    """A claim template for two GPUs with at least `memory`, and a one-replica Deployment using it,
    pinned to the h100-efa pool and tolerating the GPU taint (as the renderers emit)."""
    kube.create({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                 "metadata": {"name": name, "namespace": "team"},
                 "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                     "deviceClassName": "gpu.nvidia.com", "count": 2,
                     "selectors": [{"cel": {"expression": f'device.capacity["gpu.nvidia.com"].memory'
                                                          f'.compareTo(quantity("{memory}")) >= 0'}}]}}]}}}})
    kube.create({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": "team"},
                 "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                          "template": {"metadata": {"labels": {"app": name}}, "spec": {
                              "nodeSelector": {POOL: "h100-efa"},
                              "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                              "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": name}],
                              "containers": [{"name": "engine", "image": "vllm/vllm-openai:v0.26.0",
                                              "resources": {"claims": [{"name": "gpu"}]}}]}}}})


def _pods(kube: KubeClient, app: str) -> list[dict[str, Any]]:
    return kube.items("/api/v1/namespaces/team/pods", {"labelSelector": f"app={app}"})


def test_usable_memory_gotcha_on_the_real_scheduler(east: KubeClient) -> None:
    """Two devices with memory >= 81559Mi: the real kube-scheduler allocates the claim and the pod
    runs on an h100-efa node. The same asking >= 80Gi (the nominal H100 size) stays Pending and the
    scheduler says why in the pod's events: 'cannot allocate all claims'."""
    east.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}}, exist_ok=True)
    _gpu_workload(east, "fits", "81559Mi")
    _gpu_workload(east, "nominal", "80Gi")

    pod = wait_for("the fitting pod to run", lambda: next(
        (p for p in _pods(east, "fits") if p.get("status", {}).get("phase") == "Running"), None),
        explain=lambda: scheduler_said(east, "team"))
    node = east.get(f"/api/v1/nodes/{pod['spec']['nodeName']}")
    assert node["metadata"]["labels"][POOL] == "h100-efa"
    claim_name = pod["status"]["resourceClaimStatuses"][0]["resourceClaimName"]
    claim = east.get(f"/apis/resource.k8s.io/v1/namespaces/team/resourceclaims/{claim_name}")
    results = claim["status"]["allocation"]["devices"]["results"]
    assert len(results) == 2
    assert {r["driver"] for r in results} == {"gpu.nvidia.com"}
    assert {r["pool"] for r in results} == {pod["spec"]["nodeName"]}
    assert [r["uid"] for r in claim["status"]["reservedFor"]] == [pod["metadata"]["uid"]]

    pending = wait_for("the nominal-size pod to exist", lambda: _pods(east, "nominal"))[0]

    def reason() -> str | None:
        events = east.items("/api/v1/namespaces/team/events",
                            {"fieldSelector": f"involvedObject.name={pending['metadata']['name']}"})
        return next((e["message"] for e in events if e.get("reason") == "FailedScheduling"), None)

    message = wait_for("a FailedScheduling event", reason, explain=lambda: scheduler_said(east, "team"))
    assert "cannot allocate all claims" in message
    assert _pods(east, "nominal")[0]["status"]["phase"] == "Pending"


def test_leaderworkerset_creates_its_group(aws_sim: tuple[SimFleet, dict[str, Path]], east: KubeClient,
                                           sim_tools: SimTools) -> None:
    """A LeaderWorkerSet of size 3 (a leader + worker.nodes = 2) becomes a leader StatefulSet, a
    worker StatefulSet and 3 Running pods, through the real LWS controller and its webhooks."""
    if sim_tools.lws_dir is None:
        pytest.fail("the LeaderWorkerSet controller was not built; run scripts/bootstrap-tools --only sim")
    east.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gang"}}, exist_ok=True)
    pod = {"spec": {"nodeSelector": {POOL: "h100-efa"},
                    "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                    "containers": [{"name": "engine", "image": "vllm/vllm-openai:v0.26.0"}]}}
    east.create({"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
                 "metadata": {"name": "llama", "namespace": "gang"},
                 "spec": {"replicas": 1, "leaderWorkerTemplate": {"size": 3, "workerTemplate": pod}}})

    def running() -> list[dict[str, Any]] | None:
        pods = east.items("/api/v1/namespaces/gang/pods", {"labelSelector": "leaderworkerset.sigs.k8s.io/name=llama"})
        ok = [p for p in pods if p.get("status", {}).get("phase") == "Running"]
        return ok if len(ok) == 3 else None

    pods = wait_for("3 LWS pods to run", running, timeout=90, explain=lambda: scheduler_said(east, "gang"))
    assert sorted(p["metadata"]["name"] for p in pods) == ["llama-0", "llama-0-1", "llama-0-2"]
    indices = sorted(p["metadata"]["labels"]["leaderworkerset.sigs.k8s.io/worker-index"] for p in pods)
    assert indices == ["0", "1", "2"]
    sets = east.items("/apis/apps/v1/namespaces/gang/statefulsets")
    assert sorted(s["metadata"]["name"] for s in sets) == ["llama", "llama-0"]


# ------------------------------------------------------------------------------------ issue 12's sim contract

def test_nvidia_dra_kubelet_plugin_node_affinity_matches_every_simulated_eks_gpu_node(
        aws_sim: tuple[SimFleet, dict[str, Path]]) -> None:
    """Rule: the NVIDIA DRA driver's kubelet plugin (the DaemonSet that publishes ResourceSlices)
    runs only on nodes matching its chart's required node affinity, tolerating the GPU taint
    (sigs.k8s.io/dra-driver-nvidia-gpu v0.4.1, deployments/helm/dra-driver-nvidia-gpu/values.yaml,
    `kubeletPlugin.affinity` and `kubeletPlugin.tolerations`, held in modelplane.clouds.nvidia).
    On simulated EKS clusters (examples/aws; GKE: test_fleet_gke.py, a module of its own so
    that the two fleets are never up at once), whose nodes carry exactly the
    labels our node pools give real ones (modelplane.node_objects on modelplane.clouds.nodes), a DaemonSet
    with that affinity and those tolerations gets a pod from the real DaemonSet controller and
    kube-scheduler on every GPU node, and none on the system node, which has no
    nvidia.com/gpu.present."""
    assert_kubelet_plugin_runs_on_the_gpu_nodes_only(AWS, aws_sim[1], "EKS")
