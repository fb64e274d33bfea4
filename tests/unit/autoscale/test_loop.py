"""One pass of the autoscaling loop (modelplane.autoscale.loop) and the state it keeps
(modelplane.autoscale.state): the decided count is the next pass's `current`, histories start
as HPA's (seeded), a scale-in's replicas drain before they go, a scale-up takes draining
replicas back first, and state read back is validated with its JSON path."""

from __future__ import annotations

import json
import math

import pytest

from modelplane.api import load_manifest_text
from modelplane.autoscale import FileMetricsSource
from modelplane.autoscale import conditions as c
from modelplane.autoscale.loop import current_of, scale_fleet
from modelplane.autoscale.state import Draining, ScalingState, StateFormatError
from modelplane.scheduler import FleetPlacement, place_fleet
from tests.manifests import cluster, deployment, gpu_class, metric, pool, replica_autoscaler, to_yaml

NOW = 1_000_000.0
DRAIN_S = 60.0
FAST = {"scaleDown": {"stabilizationWindowSeconds": 30, "policies": [{"type": "Pods", "value": 4,
                                                                      "periodSeconds": 15}]}}


def fleet(replicas: int = 1, min_replicas: int = 1, behavior=FAST):
    return load_manifest_text(to_yaml([
        gpu_class("g1", 1), cluster("east", pool("gpu", "g1", 3)), cluster("west", pool("gpu", "g1", 3)),
        deployment("chat", replicas, namespace="ml"),
        replica_autoscaler("chat", "chat", 6, metric("QueueDepth", 4), namespace="ml", min_replicas=min_replicas,
                           behavior=behavior)]))


def place(f, previous):
    return place_fleet(f, FleetPlacement.from_json(previous) if previous else None).to_json()


def drained_after(now: float):
    return lambda d: now - d.since >= DRAIN_S


def one(f, state, queue: float, now: float, previous):
    source = FileMetricsSource({("ml", "chat"): {"QueueDepth": queue}})
    return scale_fleet(f, state, source, now, previous, place, drained_after(now))


def names(doc) -> list[str]:
    return sorted(r["name"] for d in doc["deployments"] if d["name"] == "chat" for r in d["replicas"])


def test_the_decided_count_is_kept_and_is_the_next_current() -> None:
    f = fleet(replicas=1)
    first = one(f, ScalingState(), 12, NOW, None)
    assert first.state.autoscalers[("ml", "chat")].replicas == 3
    assert len(names(first.placement)) == 3
    (outcome,) = first.outcomes
    assert outcome.decision.condition(c.ABLE_TO_SCALE).reason == c.SUCCEEDED_RESCALE
    record = first.state.autoscalers[("ml", "chat")].last_scale
    assert (record.from_, record.to, record.reason) == (1, 3, c.SCALED_UP) and record.at == NOW
    # the manifest still says 1; the state says 3, and 3 is what the next pass starts from
    assert current_of(f, f.autoscalers[("ml", "chat")], first.state, first.typed()) == 3
    second = one(f, first.state, 4, NOW + 15, first.placement)
    assert second.outcomes[0].decision.current == 3 and names(second.placement) == names(first.placement)
    assert second.state.autoscalers[("ml", "chat")].last_scale == record     # unchanged: no churn


def test_a_first_sight_history_is_seeded_so_the_first_scale_down_waits_the_window() -> None:
    f = fleet(replicas=3)
    first = one(f, ScalingState(), 0, NOW, None)
    assert first.outcomes[0].decision.desired == 3
    assert first.outcomes[0].decision.reason == c.SCALE_DOWN_STABILIZED
    assert [r.replicas for r in first.state.autoscalers[("ml", "chat")].history.recommendations] == [3, 0]


def test_a_parked_deployment_stays_at_zero_whatever_the_state_says() -> None:
    f = fleet(replicas=0)
    state = ScalingState.from_json({"autoscalers": {"ml/chat": {"replicas": 4, "history": {}}}, "draining": []})
    assert current_of(f, f.autoscalers[("ml", "chat")], state, None) == 0


def test_scale_in_drains_before_the_objects_go_and_scale_up_takes_draining_replicas_back() -> None:
    f = fleet(replicas=1)
    up = one(f, ScalingState(), 12, NOW, None)                        # 1 -> 3
    quiet = up
    t = NOW
    while len(names(quiet.placement)) == 3:                            # the window passes, then 3 -> 1
        t += 15
        quiet = one(f, quiet.state, 0, t, quiet.placement)
    left = sorted(set(names(up.placement)) - set(names(quiet.placement)))
    assert len(left) == 2 and names(quiet.placement) == sorted(set(names(up.placement)) - set(left))
    assert sorted(d.replica.name for d in quiet.state.draining) == left
    assert all(d.since == t for d in quiet.state.draining) and quiet.drained == ()
    # still draining a little later; gone (drained, their objects deleted) after DRAIN_S
    later = one(f, quiet.state, 0, t + 15, quiet.placement)
    assert len(later.state.draining) == 2 and later.drained == ()
    gone = one(f, later.state, 0, t + DRAIN_S, later.placement)
    assert gone.state.draining == () and sorted(d.replica.name for d in gone.drained) == left
    # a scale-up while replicas drain takes them back before placing anything new
    back = one(f, later.state, 8, t + 30, later.placement)
    assert back.outcomes[0].decision.desired == 2
    assert len(names(back.placement)) == 2 and set(names(back.placement)) <= set(names(up.placement))
    assert len(back.state.draining) == 1 and back.state.draining[0].replica.name not in names(back.placement)


def test_state_round_trips_through_json_as_the_engine_returns_it() -> None:
    f = fleet(replicas=1)
    up = one(f, ScalingState(), 12, NOW, None)
    down = up
    t = NOW
    while not down.state.draining:
        t += 15
        down = one(f, down.state, 0, t, down.placement)
    doc = json.loads(json.dumps(down.state.to_json()))
    assert ScalingState.from_json(doc) == down.state


@pytest.mark.parametrize("doc, words", [
    ([], "$: expected an object"),
    ({"autoscalers": [], "draining": []}, "$.autoscalers: expected an object"),
    ({"autoscalers": {"chat": {"replicas": 1, "history": {}}}}, "expected \"<namespace>/<deployment>\""),
    ({"autoscalers": {"ml/chat": {"replicas": -1, "history": {}}}}, "$.autoscalers['ml/chat'].replicas"),
    ({"autoscalers": {"ml/chat": {"replicas": 1, "history": {"scaleUp": [{"at": 1, "change": 0}]}}}},
     "$.autoscalers['ml/chat'].history.scaleUp[0].change"),
    ({"autoscalers": {"ml/chat": {"replicas": 1, "history": {}, "lastScale": {"at": math.inf}}}},
     ".lastScale: expected"),
    ({"draining": [{"namespace": "ml", "deployment": "chat", "since": 1e300, "replica": {}}]}, "$.draining[0]"),
    ({"draining": [{"namespace": "ml", "deployment": "chat", "since": 1.0, "replica": {"name": "x"}}]},
     "$.draining[0].replica"),
    ({"draining": [{"namespace": "ml"}] * 10_001}, "at most 10000"),
    ({"extra": 1}, "$: expected an object with autoscalers and draining"),
    ({"autoscalers": {"ml/chat": {"replicas": 1, "history": {}, "held": {"reason": 1, "message": "m"}}}},
     "$.autoscalers['ml/chat'].held: expected {reason, message}, both strings"),
    ({"autoscalers": {"ml/chat": {"replicas": 1, "history": {}, "held": "FailedGetMetrics"}}}, ".held: expected"),
])
def test_hostile_state_is_refused_with_its_path(doc, words) -> None:
    with pytest.raises(StateFormatError) as exc:
        ScalingState.from_json(doc)
    assert words in str(exc.value)


def test_a_message_read_back_is_outside_text() -> None:
    doc = {"autoscalers": {"ml/chat": {"replicas": 1, "history": {}, "lastScale": {
        "at": 1.0, "from": 1, "to": 2, "reason": "ScaledUp", "message": "\x1b[2Jok " + "x" * 5000}}}}
    record = ScalingState.from_json(doc).autoscalers[("ml", "chat")].last_scale
    assert record is not None and "\x1b" not in record.message and len(record.message) <= 1000


def test_a_pass_that_reads_no_metric_holds_and_says_so_until_one_is_read() -> None:
    """An unreadable metric holds the count (HPA's ScalingActive=False): the state keeps why,
    a read back equals it, and the next pass that reads a metric clears it."""
    f = fleet(replicas=2)
    blind = FileMetricsSource({})
    held = scale_fleet(f, ScalingState(), blind, NOW, None, place, drained_after(NOW))
    state = held.state.autoscalers[("ml", "chat")]
    assert state.replicas == 2 and state.held is not None and state.held.reason == c.FAILED_GET_METRICS
    assert ScalingState.from_json(json.loads(json.dumps(held.state.to_json()))) == held.state
    seen = one(f, held.state, 8, NOW + 15, held.placement)
    assert seen.state.autoscalers[("ml", "chat")].held is None


def test_draining_keys_are_endpoint_keys() -> None:
    f = fleet(replicas=2)
    placed = FleetPlacement.from_json(place(f, None)).find("ml", "chat")
    d = Draining("ml", "chat", placed.replicas[0], NOW)
    assert d.key == ("ml", placed.replicas[0].name)
