"""clusterPreferences (issue 14): tiers filled in order, scale-down from the least
preferred tier, and the way back up: after `returnAfterPlans` consecutive plans with
room, at most `maxMovesPerPlan` moves in flight, new replica first, old one removed by a
later plan once the new one is ready."""

import pytest

from .helpers import (
    H100,
    PolicyCase,
    check_policy,
    cluster,
    deployment,
    fleet_budget,
    of,
    placement_policy,
    pool,
    preferences,
    prev,
    replan,
    spread,
    tier,
    where,
)

SITE = "example.org/site"
REGION = "topology.kubernetes.io/region"


def c(name: str, nodes: int, site: str | None, region: str | None = None) -> dict:
    labels = {k: v for k, v in ((SITE, site), (REGION, region)) if v}
    return cluster(name, pool("p1", "h100", nodes), labels=labels or None)


def dep(replicas: int, *, return_after: int = 2, max_moves: int = 1, rules: tuple = (), name: str = "m",
        namespace: str = "default") -> dict:
    prefs = preferences(tier("onprem", **{SITE: "onprem"}), tier("cloud", **{SITE: "cloud"}),
                        return_after=return_after, max_moves=max_moves)
    return deployment(name, replicas, namespace=namespace, policy=placement_policy(*rules, prefs=prefs))


def fleet(onprem: int, cloud: int = 4, *extra: dict, **kw) -> list[dict]:
    return [H100, c("onprem", onprem, "onprem"), c("cloud", cloud, "cloud"), *extra, dep(3, **kw)]


P = "PreferencesHonored"
CASES = [
    PolicyCase("tier 1 first, the rest overflows to tier 2", fleet(1), {"m": ["cloud#0", "cloud#1", "onprem#0"]},
               conditions={"m": {P: ("True", "Overflow")}}),
    PolicyCase("all in tier 1 when it has room", fleet(5), {"m": ["onprem#0", "onprem#1", "onprem#2"]},
               conditions={"m": {P: ("True", "Preferred")}}),
    PolicyCase("a cluster in no tier takes no replica", fleet(1, 0, c("other", 9, None)), {"m": ["onprem#0"]},
               verdicts={"m": ["FitsAfterScaleUp", "FitsAfterScaleUp"]}),
    PolicyCase("scale-down removes the least preferred tier first",
               [H100, c("onprem", 5, "onprem"), c("cloud", 5, "cloud"), dep(2)], {"m": ["onprem#0", "onprem#1"]},
               previous=prev(("m", "onprem", 0, {"main": "p1"}), ("m", "onprem", 1, {"main": "p1"}),
                             ("m", "cloud", 0, {"main": "p1"}))),
    PolicyCase("kept replicas in tier 2 stay while tier 1 has no room",
               fleet(1), {"m": ["cloud#0", "cloud#1", "onprem#0"]},
               previous=prev(("m", "cloud", 0, {"main": "p1"}), ("m", "cloud", 1, {"main": "p1"}),
                             ("m", "onprem", 0, {"main": "p1"}))),
    PolicyCase("tiers and spread together: the second region comes from tier 2",
               [H100, c("onprem", 5, "onprem", "a"), c("cloud", 5, "cloud", "b"),
                dep(3, rules=(spread(REGION, 2),))],
               {"m": ["cloud#0", "onprem#0", "onprem#1"]},
               conditions={"m": {"SpreadSatisfied": ("True", "Satisfied"), P: ("True", "Overflow")}}),
]


@pytest.mark.parametrize("case", CASES, ids=str)
def test_preferences(case: PolicyCase) -> None:
    check_policy(case)


def plans(docs_per_plan: list[list[dict]], not_ready: tuple[str, ...] = ()) -> list:
    out, fp = [], None
    for docs in docs_per_plan:
        fp = replan(docs, fp, not_ready=not_ready)
        out.append(fp)
    return out


def test_return_waits_for_consecutive_plans_then_moves_new_replica_first() -> None:
    busy, free = fleet(1), fleet(3)
    p0, p1, p2, p3, p4 = plans([busy, free, free, free, free])
    assert where(p0, "m") == ["cloud#0", "cloud#1", "onprem#0"]
    # room seen once: wait (returnAfterPlans 2)
    assert where(p1, "m") == where(p0, "m")
    assert of(p1, "m").policy.return_streak == 1
    assert of(p1, "m").condition(P).reason == "ReturnPending"
    # second plan with room: the new replica is placed, the old one stays
    assert where(p2, "m") == ["cloud#0", "cloud#1", "onprem#0", "onprem#1"]
    assert [(m.from_tier, m.to_tier) for m in of(p2, "m").policy.moves] == [("cloud", "onprem")]
    assert of(p2, "m").conditions[0].message == "Scheduled 3 of 3 replicas"
    assert of(p2, "m").condition(P).reason == "Moving"
    # next plan: the new replica is ready (it is in the previous placement): drop the old one,
    # and start the next move (maxMovesPerPlan 1)
    assert where(p3, "m") == ["cloud#0", "onprem#0", "onprem#1", "onprem#2"]
    assert any("moved back to tier onprem" in why.message for _, why in of(p3, "m").dropped)
    assert where(p4, "m") == ["onprem#0", "onprem#1", "onprem#2"]
    assert of(p4, "m").condition(P) .reason == "Preferred"


def test_room_lost_resets_the_count() -> None:
    busy, free = fleet(1), fleet(3, return_after=3)
    busy = fleet(1, return_after=3)
    streaks = [of(p, "m").policy.return_streak for p in plans([busy, free, free, busy, free, free])]
    assert streaks == [0, 1, 2, 0, 1, 2]


def test_a_new_replica_not_ready_keeps_the_old_one() -> None:
    busy, free = fleet(1, return_after=1), fleet(2, return_after=1)
    p0 = replan(busy, None)
    p1 = replan(free, p0)                                   # move starts
    (move,) = of(p1, "m").policy.moves
    p2 = replan(free, p1, not_ready=(move.to,))            # the new one is not ready yet
    assert where(p2, "m") == where(p1, "m")
    assert [m.to for m in of(p2, "m").policy.moves] == [move.to]
    p3 = replan(free, p2)                                   # ready now: the old one goes
    assert move.from_ not in [r.name for r in of(p3, "m").replicas]
    assert move.to in [r.name for r in of(p3, "m").replicas]


def test_max_moves_per_plan_bounds_moves_in_flight() -> None:
    docs_busy, docs_free = fleet(0, return_after=1, max_moves=2), fleet(5, return_after=1, max_moves=2)
    p0 = replan(docs_busy, None)
    assert where(p0, "m") == ["cloud#0", "cloud#1", "cloud#2"]
    p1 = replan(docs_free, p0)
    assert len(of(p1, "m").policy.moves) == 2
    not_ready = tuple(m.to for m in of(p1, "m").policy.moves)
    p2 = replan(docs_free, p1, not_ready=not_ready)       # both still starting: no third move
    assert len(of(p2, "m").policy.moves) == 2 and len(of(p2, "m").replicas) == 5


def test_max_moves_zero_never_moves() -> None:
    busy, free = fleet(1, max_moves=0), fleet(3, max_moves=0)
    *_, last = plans([busy, free, free, free])
    assert where(last, "m") == ["cloud#0", "cloud#1", "onprem#0"]
    assert of(last, "m").condition(P).reason == "Overflow"


def test_a_move_never_breaks_spread() -> None:
    """Tier 1 is region a only; the one replica in region b (tier 2) is what keeps
    minGroups 2, so it never moves back although tier 1 has room."""
    docs = [H100, c("onprem", 9, "onprem", "a"), c("cloud", 9, "cloud", "b"),
            dep(3, return_after=1, rules=(spread(REGION, 2),))]
    *_, last = plans([docs] * 4)
    assert where(last, "m") == ["cloud#0", "onprem#0", "onprem#1"]
    assert of(last, "m").policy.moves == []


def test_moves_are_charged_to_the_budget() -> None:
    """At the budget, a move has no room (it needs the old and the new replica at once);
    one device more and it moves."""
    def docs(cap: int) -> list[dict]:
        return [*fleet(1, return_after=1)[:-1], dep(3, return_after=1, namespace="ml"),
                fleet_budget("ml", cap, namespaces=["ml"])]
    p0 = replan(docs(3), None)
    tight = plans([docs(3)] * 3)[-1]
    assert where(tight, "m", "ml") == where(p0, "m", "ml") == ["cloud#0", "cloud#1", "onprem#0"]
    bigger = replan([*docs(4)[:1], c("onprem", 3, "onprem"), *docs(4)[2:]], p0)
    assert len(of(bigger, "m", "ml").replicas) == 4
    assert max(b.used for b in bigger.budgets) == 4


def test_scaling_down_the_old_replica_cancels_its_move() -> None:
    busy, free = fleet(1, return_after=1), fleet(2, return_after=1)
    p1 = replan(free, replan(busy, None))
    (move,) = of(p1, "m").policy.moves
    shrunk = [*free[:-1], dep(1, return_after=1)]
    p2 = replan(shrunk, p1, not_ready=(move.to,))
    assert len(of(p2, "m").replicas) == 1
    assert of(p2, "m").policy.moves == []
