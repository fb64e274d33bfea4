"""The scheduler's side of the hardening round (issue 19): each test is named after its
item and fails on the code before the fix."""

from __future__ import annotations

from .helpers import (
    H100,
    cluster,
    cond,
    deployment,
    engine,
    gpu_class,
    of,
    placement_policy,
    plan,
    pool,
    preferences,
    spread,
    standalone,
    tier,
)

H8 = gpu_class("h8", 8, "81559Mi")


def test_19_14_a_second_replica_fitting_on_the_node_added_for_the_first_fits_after_scale_up():
    """One 8-GPU node holds two 4-GPU replicas; the third and fourth are unplaced. One node
    more holds both: the fourth is FitsAfterScaleUp (counting the third), not `Blocked: c1
    has room but refuses: refused`."""
    fp = plan([H8, cluster("c1", pool("p", "h8", 1)), deployment("m", 4, engine("main", standalone(gpus=4)))],
              accounting="Device")
    third, fourth = (u.feasibility for u in of(fp, "m").unplaced)
    assert third is not None and fourth is not None
    assert (third.verdict, third.cluster, dict(third.scale_up)) == ("FitsAfterScaleUp", "c1", {"p": 1})
    assert (fourth.verdict, fourth.cluster, dict(fourth.scale_up)) == ("FitsAfterScaleUp", "c1", {"p": 1})
    assert fourth.message == ("fits on c1 after adding 1 node(s) to pool p (1 -> 2 nodes: raise nodeCount from 1 "
                              "to 2), counting the unplaced replicas before it")


def test_19_14_a_fifth_replica_needs_a_second_added_node():
    fp = plan([H8, cluster("c1", pool("p", "h8", 1)), deployment("m", 5, engine("main", standalone(gpus=4)))],
              accounting="Device")
    ups = [dict(u.feasibility.scale_up) for u in of(fp, "m").unplaced if u.feasibility]
    assert ups == [{"p": 1}, {"p": 1}, {"p": 2}]


def test_19_14_room_refused_by_policy_alone_is_still_blocked():
    """The fix leaves the real case alone: a cluster with room that a policy refuses."""
    docs = [H100, cluster("a", pool("p", "h100", 4), labels={"region": "r"}),
            deployment("m", 2, policy=placement_policy(spread("region", per_group=1)))]
    fp = plan(docs)
    (u,) = of(fp, "m").unplaced
    assert u.feasibility is not None and u.feasibility.verdict == "Blocked"
    assert "spreadConstraints (a)" in u.feasibility.message


def _tiered(replicas: int, nodes: int) -> list[dict]:
    prefs = placement_policy(prefs=preferences(tier("onprem", site="onprem"), tier("cloud", site="cloud")))
    return [H100, cluster("onprem", pool("p", "h100", nodes), labels={"site": "onprem"}),
            cluster("cloud", pool("p", "h100", 0), labels={"site": "cloud"}),
            deployment("m", replicas, policy=prefs)]


def test_19_low_preferences_honored_is_not_true_when_no_replica_is_placed():
    """0 of 2 placed used to read `PreferencesHonored=True Preferred: every replica is in
    tier onprem`: true of no replica at all."""
    fp = plan(_tiered(2, 0))
    assert cond(fp, "m", "ReplicasScheduled") == ("False", "InsufficientCapacity")
    assert cond(fp, "m", "PreferencesHonored") == ("False", "NoReplicasPlaced")
    assert of(fp, "m").condition("PreferencesHonored").message == (
        "0 of 2 replicas placed, in no tier (ReplicasScheduled says why)")


def test_19_low_preferences_honored_when_some_or_none_are_wanted():
    assert cond(plan(_tiered(2, 1)), "m", "PreferencesHonored") == ("True", "Preferred")
    assert cond(plan(_tiered(0, 1)), "m", "PreferencesHonored") == ("True", "ScaledToZero")
