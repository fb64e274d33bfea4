"""Failover (scheduler.failover): a cluster in an outage takes no new replica; once its grace
period is over its replicas are re-placed elsewhere, new first, and the old ones leave only
when the new ones are ready and the old cluster answers. Named multi-plan scenarios."""

from __future__ import annotations

from typing import Any

from modelplane.api import load_manifest_text
from modelplane.scheduler import FleetPlacement, Outage, place_fleet
from tests import manifests as g

DOWN = Outage("unreachable since 100 (no answer)", evacuate=False, reachable=False)
GONE = Outage("unreachable since 100 (no answer); grace period over", evacuate=True, reachable=False)
SICK = Outage("unready since 100; grace period over", evacuate=True, reachable=True)


def fleet(replicas: int = 1, prefs: dict[str, Any] | None = None, clusters: tuple[str, ...] = ("a", "b"),
          nodes: int = 1) -> Any:
    cls = g.gpu_class("h100x8", 8)
    docs = [cls, *[g.cluster(c, g.pool("gpu", "h100x8", nodes), labels={"site": c}) for c in clusters],
            g.deployment("chat", replicas, g.engine("main", g.standalone(8)),
                         policy=g.placement_policy(prefs=prefs) if prefs else None)]
    return load_manifest_text(g.to_yaml(docs))


def where(p: FleetPlacement) -> list[tuple[str, int]]:
    return [(r.cluster, r.index) for r in p.deployments[0].replicas]


def plan(fl: Any, prev: FleetPlacement | None, outages: dict[str, Outage] | None = None,
         not_ready: tuple[str, ...] = ()) -> FleetPlacement:
    previous = g.previous_from(prev, not_ready) if prev is not None else None
    return place_fleet(fl, previous, outages=outages or {})


def test_an_outage_keeps_replicas_and_takes_no_new_one() -> None:
    fl = fleet()
    first = plan(fl, None)
    assert where(first) == [("a", 0)]
    fl2 = fleet(replicas=3)
    second = plan(fl2, first, {"a": DOWN})
    dep = second.deployments[0]
    assert where(second) == [("a", 0), ("b", 0)]
    assert dep.unplaced[0].reasons["a"].message == f"cluster unavailable: {DOWN.reason}"
    assert not dep.failover


def test_unreachable_past_its_grace_the_replica_is_replaced_elsewhere_and_kept_until_its_cluster_answers() -> None:
    fl = fleet()
    first = plan(fl, None)
    old = first.deployments[0].replicas[0].name
    failed = plan(fl, first, {"a": GONE})
    dep = failed.deployments[0]
    new = next(r.name for r in dep.replicas if r.cluster == "b")
    assert where(failed) == [("a", 0), ("b", 0)]                # new first, old still there
    assert [f.to_json() for f in dep.failover] == [{"from": old, "cluster": "a", "to": new}]
    assert dep.condition("ReplicasScheduled").message == "Scheduled 1 of 1 replicas"
    assert dep.condition("FailedOver").status == "True"
    # still unreachable, the replacement ready: the old one cannot be deleted there, it stays
    still = plan(fl, failed, {"a": GONE})
    assert where(still) == [("a", 0), ("b", 0)] and still.deployments[0].failover == dep.failover
    # back, the replacement not ready yet: the old one stays aside, a takes nothing new
    back = plan(fl, still, {}, not_ready=(new,))
    assert where(back) == [("a", 0), ("b", 0)] and back.deployments[0].failover == dep.failover
    # the replacement is ready: the old one leaves
    done = plan(fl, back, {})
    assert where(done) == [("b", 0)] and not done.deployments[0].failover
    assert [why.message for r, why in done.deployments[0].dropped] == [f"failed over: {new} replaces it and is ready"]
    # and nothing moves back by itself: ten more plans, the same placement
    current = done
    for _ in range(10):
        current = plan(fl, current, {})
        assert where(current) == [("b", 0)]


def test_a_reachable_but_unready_cluster_hands_over_as_soon_as_the_replacement_is_ready() -> None:
    fl = fleet()
    first = plan(fl, None)
    failed = plan(fl, first, {"a": SICK})
    assert where(failed) == [("a", 0), ("b", 0)]
    done = plan(fl, failed, {"a": SICK})
    assert where(done) == [("b", 0)]


def test_with_no_room_elsewhere_the_replica_stays_and_counts_again_when_its_cluster_returns() -> None:
    fl = fleet(clusters=("a",))
    first = plan(fl, None)
    failed = plan(fl, first, {"a": GONE})
    dep = failed.deployments[0]
    assert where(failed) == [("a", 0)]
    assert [f.to for f in dep.failover] == [None]
    assert dep.condition("ReplicasScheduled").status == "False"
    assert "no replacement fits anywhere" in dep.condition("FailedOver").message
    back = plan(fl, failed, {})
    assert where(back) == [("a", 0)] and not back.deployments[0].failover
    assert back.deployments[0].condition("ReplicasScheduled").message == "Scheduled 1 of 1 replicas"


def test_the_return_to_a_preferred_cluster_follows_the_preferences_hysteresis() -> None:
    prefs = g.preferences(g.tier("first", site="a"), g.tier("second", site="b"), return_after=3)
    fl = fleet(prefs=prefs)
    first = plan(fl, None)
    failed = plan(fl, first, {"a": GONE})
    new = next(r.name for r in failed.deployments[0].replicas if r.cluster == "b")
    done = plan(fl, failed, {})
    assert where(done) == [("b", 0)]
    history = [where(done)]
    current = done
    for _ in range(10):
        current = plan(fl, current, {})
        history.append(where(current))
    # room on a for 3 consecutive plans, then one move (new first), then the old one leaves: once
    assert history[:3] == [[("b", 0)]] * 3
    assert [("a", 0), ("b", 0)] in history
    assert history[-1] == [("a", 0)] and history.count([("a", 0)]) == len(history) - history.index([("a", 0)])
    assert new != current.deployments[0].replicas[0].name
