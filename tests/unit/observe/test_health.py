"""Cluster health across runs (modelplane.observe.health), with the check's time as an input."""

from __future__ import annotations

from typing import Any

import pytest

from modelplane.api import load_manifest_text
from modelplane.observe.health import (
    UNREACHABLE,
    UNREADY,
    ClusterHealth,
    FailoverSettings,
    assess,
    health_from_json,
    health_to_json,
    outages,
)
from modelplane.observe.read import ClusterRead, NotRead, Unreachable
from modelplane.observe.verify import NOT_READY, READY, ReplicaCheck, Verification
from modelplane.scheduler import FleetPlacement, place_fleet
from tests import manifests as g

SETTINGS = FailoverSettings(unreachable_grace=60, unready_grace=600)


def placement() -> FleetPlacement:
    docs = [g.gpu_class("c", 1), g.cluster("a", g.pool("gpu", "c", 2)), g.cluster("b", g.pool("gpu", "c", 2)),
            g.deployment("chat", 2, g.engine("main", g.standalone(1)))]
    return place_fleet(load_manifest_text(g.to_yaml(docs)))


def checks(p: FleetPlacement, ready: dict[str, bool]) -> Verification:
    return Verification(tuple(ReplicaCheck("default", "chat", r.name, r.cluster, r.index,
                                           READY if ready[r.cluster] else NOT_READY)
                              for r in p.deployments[0].replicas))


UP: dict[str, Any] = {"a": ClusterRead("a"), "b": ClusterRead("b")}


def test_a_cluster_unreachable_is_recorded_once_and_evacuated_after_its_grace() -> None:
    p = placement()
    down = {"a": Unreachable("a", "connection refused"), "b": ClusterRead("b")}
    h1 = assess({}, down, checks(p, {"a": False, "b": True}), p, now=1000.4)
    assert h1 == {"a": ClusterHealth(UNREACHABLE, 1000, "connection refused")}
    # a later check, another error text: the record (and so the state) does not change
    h2 = assess(h1, {**down, "a": Unreachable("a", "timed out")}, checks(p, {"a": False, "b": True}), p, now=1059)
    assert h2 == h1
    assert outages(h2, 1059, SETTINGS)["a"].evacuate is False
    out = outages(h2, 1060, SETTINGS)["a"]
    assert (out.evacuate, out.reachable) == (True, False)
    assert "grace period over" in out.reason
    # back: the record is cleared, the next failure starts a new grace period
    assert assess(h2, UP, checks(p, {"a": True, "b": True}), p, now=2000) == {}


def test_a_reachable_cluster_whose_replicas_are_all_unready_is_unready() -> None:
    p = placement()
    h = assess({}, UP, checks(p, {"a": False, "b": True}), p, now=50)
    assert list(h) == ["a"] and h["a"].condition == UNREADY
    assert outages(h, 50 + 599, SETTINGS)["a"].evacuate is False
    out = outages(h, 50 + 600, SETTINGS)["a"]
    assert (out.evacuate, out.reachable) == (True, True)


def test_unhealthy_all_along_keeps_its_first_time_when_the_condition_changes() -> None:
    p = placement()
    h1 = assess({}, {"a": Unreachable("a", "x"), "b": ClusterRead("b")}, checks(p, {"a": False, "b": True}), p, 10)
    h2 = assess(h1, UP, checks(p, {"a": False, "b": True}), p, 500)
    assert h2["a"] == ClusterHealth(UNREADY, 10, "none of its 1 replica(s) is ready")


@pytest.mark.parametrize("reading", [NotRead("a", "kubeconfig unusable"), None])
def test_a_cluster_not_asked_learns_nothing(reading: Any) -> None:
    p = placement()
    before = {"a": ClusterHealth(UNREACHABLE, 10, "x")}
    readings: dict[str, Any] = {"b": ClusterRead("b")}
    if reading is not None:
        readings["a"] = reading
    after = assess(before, readings, checks(p, {"a": False, "b": True}), p, 99)
    assert after == (before if reading is not None else {})


def test_json_round_trip_and_bad_settings() -> None:
    h = {"a": ClusterHealth(UNREADY, 5, "r")}
    assert health_from_json(health_to_json(h)) == h
    with pytest.raises(ValueError):
        health_from_json({"a": {"condition": "Sad", "since": 1}})
    with pytest.raises(ValueError):
        FailoverSettings.from_json({"unreachableGraceSeconds": -1})
    assert FailoverSettings.from_json(SETTINGS.to_json()) == SETTINGS
