"""The sim stack where things go wrong: the usable-memory gotcha on the real kube-scheduler with the
policy pack advisory and mandatory, and a sim that is not running (preview fails at once, naming the
cluster and what to do); the published-attributes gotcha is test_stack_attribute_gap.py, a module of
its own so that its fleet and this one are never up at once (one module-scoped fleet per module:
docs/ci.md#memory). Needs both tool groups (scripts/bootstrap-tools)."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from pulumi import automation as auto

from sim import SimFleet
from tests.sim.conftest import StackFactory
from tests.sim.fleets import gotcha_fleet
from tests.sim.stack import SimStack, bounded_await, failed_scheduling, ml_team_pods, wait_for

from .conftest import REPO

pytestmark = [pytest.mark.sim, pytest.mark.engine]

PACK = str(REPO / "policy-packs" / "modelplane")
# A preview whose sim is down must fail this fast (it starts the program and the placement only).
FAST_S = 60.0


@pytest.fixture(scope="module")
def gotcha(module_fleet: Callable[..., tuple[SimFleet, dict[str, Path]]],
           tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, SimFleet]:
    manifests = gotcha_fleet(tmp_path_factory.mktemp("gotcha"))
    sim, _ = module_fleet(manifests)
    return manifests, sim


@pytest.fixture(scope="module")
def gotcha_stack(gotcha: tuple[Path, SimFleet], module_sim_stack: StackFactory) -> SimStack:
    manifests, sim = gotcha
    return module_sim_stack(manifests, sim.state_dir, bounded_await(sim))


def test_mandatory_pack_stops_the_preview_before_anything_is_applied(gotcha_stack: SimStack) -> None:
    """With the pack as shipped (mandatory), `preview` fails naming the class that declares 80Gi,
    each selector only the nominal size satisfies, and the replica the fleet scheduler could not
    place; nothing reaches the clusters."""
    with pytest.raises(auto.errors.CommandError) as failed:
        gotcha_stack.preview(policy_packs=[PACK])
    text = str(failed.value)
    assert "InferenceClass/h100-nominal" in text and "declares 80Gi for an NVIDIA H100 80GB" in text, text
    for deployment in ("nominal-class", "nominal-selector"):
        assert f"ModelDeployment/ml-team/{deployment}" in text and "only the nominal 80Gi" in text
    assert "[mandatory]  usable-gpu-memory" in text and "[mandatory]  replicas-fully-scheduled" in text
    assert gotcha_stack.kubernetes_objects() == []
    assert ml_team_pods(gotcha_stack, "nominal") == ml_team_pods(gotcha_stack, "usable") == []


def test_advisory_pack_lets_the_nominal_class_through_and_the_real_scheduler_refuses_its_claim(
        gotcha_stack: SimStack, tmp_path: Path) -> None:
    """With the pack advisory, `up` applies: the fleet scheduler places `nominal-class` (its class
    says 80Gi), its pod stays Pending and the real kube-scheduler says why in the pod's events
    ("cannot allocate all claims": the devices publish 81559Mi), and `up` fails after the sim's
    await timeout naming the Deployment instead of hanging. `nominal-selector`, whose class declares
    the usable 81559Mi, was refused by the fleet scheduler first: nothing of it runs anywhere."""
    config = tmp_path / "advisory.json"
    config.write_text(json.dumps({"usable-gpu-memory": "advisory", "replicas-fully-scheduled": "advisory"}))
    started = time.monotonic()
    with pytest.raises(auto.errors.CommandError) as failed:
        gotcha_stack.up(policy_packs=[PACK], policy_pack_configs=[str(config)])
    text = str(failed.value)
    assert time.monotonic() - started < 240, "the failing update was not bounded by sim.awaitTimeoutSeconds"
    assert "[advisory]  usable-gpu-memory" in text
    assert "ml-team/nominal-class: 1 of 1 replicas placed" in text
    assert "ml-team/nominal-selector: 0 of 1 replicas placed" in text
    assert "nominal-class" in text and "timed out waiting to be Ready" in text, text

    (pod,) = ml_team_pods(gotcha_stack, "nominal")
    assert pod["status"]["phase"] == "Pending"
    with gotcha_stack.kube("nominal") as kube:
        message = failed_scheduling(kube, pod)
    assert "cannot allocate all claims" in message, message
    assert ml_team_pods(gotcha_stack, "usable") == []


def test_a_sim_of_another_fleet_fails_the_preview_naming_the_cluster(
        gotcha: tuple[Path, SimFleet], sim_stack: StackFactory) -> None:
    """examples/kind against the running sim of another fleet: the preview fails at once, naming
    the first cluster it lacks (clusters are registered in name order) and how to restart the sim
    for this fleet."""
    _, sim = gotcha
    stack = sim_stack(REPO / "examples" / "kind", sim.state_dir)
    started = time.monotonic()
    with pytest.raises(auto.errors.CommandError) as failed:
        stack.preview()
    assert time.monotonic() - started < FAST_S
    text = str(failed.value)
    assert "InferenceCluster eu-west (sim stack): the simulated clusters in" in text, text
    assert "were started from another fleet" in text and "python -m modelplane sim down" in text
    assert f"python -m modelplane sim up {REPO / 'examples' / 'kind'} --state-dir {sim.state_dir}" in text


def test_a_stopped_api_server_is_an_unreachable_cluster_and_without_observe_fails_the_preview(
        gotcha: tuple[Path, SimFleet], gotcha_stack: SimStack) -> None:
    """Last in this module (it breaks the sim): with the kube-apiserver of `usable` killed, the
    preview (observing the clusters, the default) finishes at once, warning which process of which
    cluster stopped and how to restart it, and places with `usable` unreachable (docs/observe.md);
    with `modelplane:observe: false` nothing would fail the cluster over, so the preview fails."""
    _, sim = gotcha
    record = json.loads(sim.state_file.read_text())
    pid = next(p["pid"] for p in record["clusters"]["usable"]["processes"] if p["name"] == "kube-apiserver")
    os.kill(pid, signal.SIGKILL)  # a process this test's fixture started
    wait_for("the kube-apiserver to exit", lambda: not next(r for r in sim.status() if r.name == "usable").running)
    stopped = "InferenceCluster usable (sim stack): its simulated cluster is not running (kube-apiserver stopped)"
    started = time.monotonic()
    preview = gotcha_stack.preview()
    assert time.monotonic() - started < FAST_S
    assert stopped in preview.stdout and "python -m modelplane sim down" in preview.stdout, preview.stdout
    assert "usable: declared (unreachable: the API server at https://127.0.0.1:" in preview.stdout

    gotcha_stack.set_config("modelplane:observe", "false")
    started = time.monotonic()
    with pytest.raises(auto.errors.CommandError) as failed:
        gotcha_stack.preview()
    assert time.monotonic() - started < FAST_S
    text = str(failed.value)
    assert stopped in text and "python -m modelplane sim down" in text, text


def test_without_a_sim_the_preview_fails_at_once_naming_the_cluster_and_sim_up(
        sim_stack: StackFactory, tmp_path: Path) -> None:
    """No simulated cluster runs from the state directory: the preview fails in seconds (it
    never asks the Kubernetes provider to reach a cluster) with the command that starts them."""
    stack = sim_stack(REPO / "examples" / "kind", tmp_path / "no-sim")
    started = time.monotonic()
    with pytest.raises(auto.errors.CommandError) as failed:
        stack.preview()
    assert time.monotonic() - started < FAST_S
    text = str(failed.value)
    assert (f"InferenceCluster eu-west (sim stack): no simulated clusters run from {tmp_path / 'no-sim'}; start "
            f"the fleet's simulated clusters with `python -m modelplane sim up {REPO / 'examples' / 'kind'} "
            f"--state-dir {tmp_path / 'no-sim'}`") in text, text
    assert "unhandled exception" not in text and "Traceback" not in text


def test_dynamo_clusters_are_refused_at_preview_with_the_reason(sim_stack: StackFactory, tmp_path: Path) -> None:
    """The sim cannot run Grove or the KAI scheduler (no CRDs: the Go module proxy serves neither),
    so a Dynamo cluster fails the preview with that reason, naming the manifest, instead of a
    partial `up` that applies everything but the engines."""
    stack = sim_stack(REPO / "examples" / "dynamo", tmp_path / "no-sim")
    with pytest.raises(auto.errors.CommandError) as failed:
        stack.preview()
    text = str(failed.value)
    assert "fleet.yaml#" in text and "runs the Dynamo stack, which the sim stack cannot rehearse" in text, text
    assert "Grove" in text and "KAI" in text and "docs/sim.md" in text
