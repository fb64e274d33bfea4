"""The decision in the placement resource's state, through the whole program under mocks (the
harness runs the provider's check() as the engine does at preview, and carries each run's state
to the next as `olds`): `up` keeps the autoscaled count between runs, the preview logs the change
with its reason, and a scale-in first takes the replicas out of the routes (their objects kept),
then deletes them once drained. A fleet without an autoscaler places exactly as before."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import yaml

from tests.pulumi.harness import resolve, run_program

REPO = Path(__file__).resolve().parents[2]
LIVE = REPO / "examples" / "autoscaling-live"
DRAIN_S = 30
START = 1_900_000_000.0


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch):
    """check()'s clock (providers/placement.py reads time.time())."""
    now = [START]
    monkeypatch.setattr(time, "time", lambda: now[0])
    return now


def metrics(tmp_path: Path, running: float, waiting: float) -> str:
    path = tmp_path / f"metrics-{running}-{waiting}.json"
    path.write_text(json.dumps({"ml-team/chat": {"RequestsRunning": running, "QueueDepth": waiting}}))
    return str(path)


def run(tmp_path: Path, running: float, waiting: float, previous=None, preview: bool = False):
    return run_program("render", preview=preview, previous=previous, config={
        "manifests": str(LIVE), "autoscale": {"metricsFile": metrics(tmp_path, running, waiting),
                                              "drainSeconds": DRAIN_S}})


def chat_objects(r) -> set[str]:
    """The chat replicas whose Deployments are registered (their pods' `modelplane.ai/serving`)."""
    return {reg.inputs["spec"]["template"]["metadata"]["labels"]["modelplane.ai/serving"] for reg in r.resources
            if reg.typ == "kubernetes:apps/v1:Deployment" and reg.parent.endswith("::ml-team-chat")}


def routed(r) -> set[str]:
    """The clusters the control plane routes chat to."""
    cp = yaml.safe_load(r.named("modelplane-gateway-routes").inputs["data"]["routes.yaml"])
    clusters = {child["name"].rsplit("-c-", 1)[1] for s in cp["http"]["services"].values()
                for child in (s.get("weighted") or {}).get("services", []) if "-c-" in child["name"]}
    return clusters


def workload_replicas(r, cluster: str) -> set[str]:
    wl = yaml.safe_load(r.named(f"{cluster}-gateway-routes").inputs["data"]["routes.yaml"])
    services = (wl.get("http") or {}).get("services") or {}
    return {name for name, s in services.items() if name.startswith("replica-") and "loadBalancer" in s}


def replicas(r) -> list[tuple[str, str]]:
    return sorted((x["cluster"], x["name"]) for x in resolve(r.outputs["placement"])["deployments"][0]["replicas"])


def test_up_keeps_the_autoscaled_count_and_preview_says_why(tmp_path, clock) -> None:
    first = run(tmp_path, 2, 6)                      # 1 replica, saturated, 6 waiting
    scaling = resolve(first.outputs["autoscaling"])
    assert scaling["autoscalers"]["ml-team/chat"]["replicas"] == 4
    last = scaling["autoscalers"]["ml-team/chat"]["lastScale"]
    assert (last["from"], last["to"], last["reason"]) == (1, 4, "TooManyReplicas")
    assert len(replicas(first)) == 4 and {c for c, _ in replicas(first)} == {"eu-west", "us-east"}
    assert any(m.startswith("autoscaling:\n  ml-team/chat: 4 replica(s); last scaled 1 -> 4 at ") and
               "TooManyReplicas" in m for m in first.infos()), first.infos()
    # the history lives in the resource's state, not in the stack output
    state = first.state["fleet-placement"]["autoscaling"]
    assert state["autoscalers"]["ml-team/chat"]["history"]["recommendations"]
    assert "history" not in scaling["autoscalers"]["ml-team/chat"]

    # the next run starts from 4 (the manifest still says 1): at the target it holds
    clock[0] += 15
    second = run(tmp_path, 1.5, 0, previous=first.state)
    assert resolve(second.outputs["autoscaling"])["autoscalers"]["ml-team/chat"]["replicas"] == 4
    assert replicas(second) == replicas(first)
    assert resolve(second.outputs["autoscaling"])["autoscalers"]["ml-team/chat"]["lastScale"] == last


def test_a_scale_in_leaves_the_routes_first_and_deletes_once_drained(tmp_path, clock) -> None:
    up = run(tmp_path, 2, 6)
    four = replicas(up)
    assert len(chat_objects(up)) == 4 and routed(up) == {"eu-west", "us-east"}
    clock[0] += 15
    held = run(tmp_path, 0.1, 0, previous=up.state)       # quiet, 15 s later: past the 8 s scale-down window
    scaling = resolve(held.outputs["autoscaling"])
    assert scaling["autoscalers"]["ml-team/chat"]["replicas"] == 1
    kept = replicas(held)
    assert len(kept) == 1
    draining = {d["replica"] for d in scaling["draining"]}
    assert draining == {name for _, name in four} - {name for _, name in kept}
    # out of the routes: the control plane routes only the kept replica's cluster; a workload
    # gateway keeps a leaving replica only where it is the cluster's last one
    (kept_cluster, kept_name) = kept[0]
    assert routed(held) == {kept_cluster}
    assert workload_replicas(held, kept_cluster) == {f"replica-ml-team-{kept_name}"}
    other = "us-east" if kept_cluster == "eu-west" else "eu-west"
    assert len(workload_replicas(held, other)) == 2        # both leaving: still answer stragglers there
    # ... while every replica's objects stay applied
    assert len(chat_objects(held)) == 4
    assert any("is out of the routes since" in m for m in held.infos())

    clock[0] += DRAIN_S - 1
    still = run(tmp_path, 0.1, 0, previous=held.state)
    assert len(chat_objects(still)) == 4 and len(resolve(still.outputs["autoscaling"])["draining"]) == 3
    clock[0] += 1
    gone = run(tmp_path, 0.1, 0, previous=still.state)
    assert resolve(gone.outputs["autoscaling"])["draining"] == []
    assert len(chat_objects(gone)) == 1 and replicas(gone) == kept
    assert workload_replicas(gone, other) == set()


def test_a_preview_shows_the_change_before_up_makes_it(tmp_path, clock) -> None:
    up = run(tmp_path, 1, 0)                              # 1 replica, below the target: 1
    assert len(replicas(up)) == 1
    clock[0] += 15
    preview = run(tmp_path, 2, 3, previous=up.state, preview=True)
    assert len(replicas(preview)) == 3                   # ceil(3 / 1) waiting
    assert any("last scaled 1 -> 3" in m and "ScaledUp" in m for m in preview.infos()), preview.infos()


def test_a_fleet_without_an_autoscaler_has_no_autoscale_input_or_output() -> None:
    plain = run_program("render", config={"autoscale": {"metricsFile": "/nowhere.json"}})
    assert "autoscaling" not in plain.outputs
    assert "autoscale" not in plain.named("fleet-placement").inputs


def test_a_broken_metrics_file_fails_the_check_naming_it(tmp_path, clock) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"ml-team/chat": {"QueueDepth": "lots"}}')
    with pytest.raises(AssertionError, match=r"metrics file .*bad\.json: ml-team/chat\.'QueueDepth': expected a "
                                              "number"):
        run_program("render", config={"manifests": str(LIVE), "autoscale": {"metricsFile": str(bad)}})
    with pytest.raises(Exception, match="unknown key"):
        run_program("render", config={"manifests": str(LIVE), "autoscale": {"metricFile": str(bad)}})


def test_an_autoscaled_fleet_without_an_autoscale_block_still_runs_the_loop(monkeypatch, clock) -> None:
    """No `modelplane:autoscale` config is `{}`, every default: the placement resource still takes
    the `autoscale` input and exports `autoscaling` (an empty block once read as "no autoscaler"
    and the program asked the resource for an output it had never declared). With no cluster to
    read, every metric is unreadable, so the count holds at the deployment's and the output says why."""
    from modelplane.autoscale.loop import METRICS_FILE_ENV

    monkeypatch.delenv(METRICS_FILE_ENV, raising=False)
    r = run_program("render", config={"manifests": str(LIVE)})
    assert r.named("fleet-placement").inputs["autoscale"] == {}
    scaling = resolve(r.outputs["autoscaling"])["autoscalers"]["ml-team/chat"]
    assert scaling["replicas"] == len(replicas(r)) == 1, scaling
    assert scaling["held"]["reason"] == "FailedGetMetrics" and "no metrics source" in scaling["held"]["message"]
    assert any("ml-team/chat: 1 replica(s); held: FailedGetMetrics: no metric could be read" in m
               for m in r.infos()), r.infos()
