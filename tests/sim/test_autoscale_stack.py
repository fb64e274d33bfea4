"""The autoscaling loop on the sim stack (real kube-apiservers, schedulers, kwok, the real Pulumi
engine): `reconcile --metrics FILE` applies the autoscaled replicas to the API servers (kwok pods
serve no traffic, so the metrics come from the file); the decision is kept in the placement
resource's state between runs; a scale-in first takes the replicas out of the routes (their
Deployments stay, the gateways' route ConfigMaps no longer name them at the control plane), and
the `up` after `drainSeconds` deletes them. Before any file is given, the scraped source reads the
kwok pods through the pod proxy and, finding no metrics there, holds (never a scale-down).
Needs both tool groups."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest
import yaml

from tests.sim.conftest import REPO, StackFactory
from tests.sim.stack import SimStack, scheduler_said, wait_for
from tests.sim.test_observe_stack import Loop, StartFleet, outputs, reconcile_cli, succeeded  # noqa: F401

pytestmark = [pytest.mark.sim, pytest.mark.engine]
DRAIN_S = 5
WINDOW_S = 8      # examples/autoscaling-live's scale-down window


def chat_deployments(stack: SimStack) -> dict[str, list[str]]:
    """cluster -> the chat replicas whose Deployment exists there (from the API server)."""
    out = {}
    for cluster in ("eu-west", "us-east"):
        with stack.kube(cluster) as kube:
            out[cluster] = sorted(d["spec"]["template"]["metadata"]["labels"]["modelplane.ai/serving"]
                                  for d in kube.items("/apis/apps/v1/namespaces/ml-team/deployments")
                                  if d["metadata"]["labels"].get("modelplane.ai/deployment") == "chat")
    return out


def control_routes(stack: SimStack) -> dict:
    with stack.kube("control") as kube:
        cm = kube.get("/api/v1/namespaces/modelplane-system/configmaps/modelplane-gateway-routes")
    return yaml.safe_load(cm["data"]["routes.yaml"])


def routed_clusters(routes: dict) -> set[str]:
    return {child["name"].rsplit("-c-", 1)[1] for s in routes["http"]["services"].values()
            for child in (s.get("weighted") or {}).get("services", []) if "-c-" in child["name"]}


def run_cycle(start: Loop, stack: SimStack, metrics: Path) -> str:
    loop = start(stack, "--interval", "1s", "--cycles", "1", "--metrics", str(metrics))
    stdout, stderr = loop.communicate(timeout=600)
    assert loop.returncode == 0, stdout + stderr
    (line,) = [ln for ln in stdout.splitlines() if " reconcile " in ln]
    return line


@pytest.mark.timeout(1500)
def test_reconcile_with_a_metrics_file_scales_the_real_clusters_and_drains_before_deleting(
        start_fleet: StartFleet, sim_stack: StackFactory, reconcile_cli: Loop,  # noqa: F811 - the fixture, imported
        tmp_path: Path) -> None:
    manifests = tmp_path / "fleet"
    shutil.copytree(REPO / "examples" / "autoscaling-live", manifests)
    sim, _ = start_fleet(manifests)
    stack = sim_stack(manifests, sim.state_dir, {"modelplane:autoscale": {"drainSeconds": DRAIN_S,
                                                                          "timeoutSeconds": 3}})
    up = succeeded(stack.up())
    first = outputs(up)
    assert first["autoscaling"]["autoscalers"]["ml-team/chat"]["replicas"] == 1
    assert sum(len(v) for v in chat_deployments(stack).values()) == 1
    assert "autoscaling:" in up.stdout

    # the scraped source on the real API servers: kwok pods answer nothing through the proxy
    held = outputs(succeeded(stack.up()))["autoscaling"]["autoscalers"]["ml-team/chat"]
    assert held["replicas"] == 1 and "lastScale" not in held

    busy = tmp_path / "busy.json"
    busy.write_text(json.dumps({"ml-team/chat": {"RequestsRunning": 2, "QueueDepth": 3}}))
    line = run_cycle(reconcile_cli, stack, busy)
    assert "autoscaled: ml-team/chat 1 -> 3" in line and "up: " in line, line
    after = outputs(stack)
    assert after["autoscaling"]["autoscalers"]["ml-team/chat"]["replicas"] == 3
    assert after["autoscaling"]["autoscalers"]["ml-team/chat"]["lastScale"]["reason"] == "ScaledUp"
    three = chat_deployments(stack)
    assert sum(len(v) for v in three.values()) == 3 and all(three.values()), three   # across both clusters
    assert routed_clusters(control_routes(stack)) == {"eu-west", "us-east"}
    with stack.kube("eu-west") as kube:
        wait_for("the chat pods Running", lambda: len([
            p for p in kube.items("/api/v1/namespaces/ml-team/pods")
            if p["status"].get("phase") == "Running"]) == len(three["eu-west"]),
            explain=lambda: scheduler_said(kube, "ml-team"))

    # quiet: after the scale-down window, 3 -> 1; the leaving replicas keep their objects
    quiet = tmp_path / "quiet.json"
    quiet.write_text(json.dumps({"ml-team/chat": {"RequestsRunning": 0.2, "QueueDepth": 0}}))
    # the window counts from the scale-up the state recorded (its wall-clock `at`), not from now
    time.sleep(max(0.0, after["autoscaling"]["autoscalers"]["ml-team/chat"]["lastScale"]["at"] + WINDOW_S + 1
                   - time.time()))
    line = run_cycle(reconcile_cli, stack, quiet)
    assert "autoscaled: ml-team/chat 3 -> 1" in line, line
    scaled_in = outputs(stack)
    (kept,) = scaled_in["placement"]["deployments"][0]["replicas"]
    draining = scaled_in["autoscaling"]["draining"]
    assert len(draining) == 2 and kept["name"] not in {d["replica"] for d in draining}
    assert chat_deployments(stack) == three                       # still applied: draining
    assert routed_clusters(control_routes(stack)) == {kept["cluster"]}

    # once drained (drainSeconds later), the next up deletes them
    time.sleep(max(0.0, max(d["since"] for d in draining) + DRAIN_S + 1 - time.time()))   # from the recorded start
    run_cycle(reconcile_cli, stack, quiet)
    gone = outputs(stack)
    assert gone["autoscaling"]["draining"] == []
    assert {c: v for c, v in chat_deployments(stack).items() if v} == {kept["cluster"]: [kept["name"]]}
    assert gone["autoscaling"]["autoscalers"]["ml-team/chat"]["replicas"] == 1
