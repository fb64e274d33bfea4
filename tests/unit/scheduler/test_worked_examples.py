"""The reference's worked examples (semantics §2.10) that other tables do not already
cover end to end, and mission.md behaviours 4 and 5."""

from modelplane.naming import replica_name
from modelplane.scheduler.reasons import messages

from .helpers import H100, cluster, deployment, engine, gpu_class, of, plan, pool, prev, standalone, where

TWO = [gpu_class("h100", 1, "81559Mi"), cluster("a", pool("p1", "h100", 2)),
       cluster("b", pool("p1", "h100", 1))]


def test_example_1_spread_then_pack_in_placement_order() -> None:
    fp = plan([*TWO, deployment("m", 3)])
    # a (load 0, name), b (load 0), a (loads tie 1/1, name) -> sorted result
    assert where(fp, "m") == ["a#0", "a#1", "b#0"]
    assert [r.name for r in of(fp, "m").replicas] == [
        replica_name("m", "a", 0), replica_name("m", "a", 1), replica_name("m", "b", 0)]


def test_example_2_scale_down_3_to_2_removes_a1() -> None:
    first = plan([*TWO, deployment("m", 3)])
    fp = plan([*TWO, deployment("m", 2)], previous=first)
    assert where(fp, "m") == ["a#0", "b#0"]
    assert [(r.cluster, r.index, why.message) for r, why in of(fp, "m").dropped] == [("a", 1, "scaled down")]


def test_example_3_shortfall_is_reported_not_true() -> None:
    fp = plan([*TWO, deployment("m", 4)])
    assert where(fp, "m") == ["a#0", "a#1", "b#0"]
    cond = of(fp, "m").conditions[0]
    # Divergence: the reference says True/ReplicasCreated for a partial shortfall.
    assert (cond.type, cond.status, cond.reason, cond.message) == (
        "ReplicasScheduled", "False", "PartialCapacity", "Scheduled 3 of 4 replicas")
    assert [u.index for u in of(fp, "m").unplaced] == [3]


def test_examples_are_stable_when_re_planned_from_their_own_output() -> None:
    first = plan([*TWO, deployment("m", 3)])
    again = plan([*TWO, deployment("m", 3)], previous=first)
    assert again.to_json() == first.to_json()


REGIONS = [H100,
           cluster("us", pool("gpu", "h100", 1), labels={"modelplane.ai/region": "us"}),
           cluster("eu", pool("gpu", "h100", 1), labels={"modelplane.ai/region": "eu"})]


def test_mission_4_two_deployments_land_in_different_regions() -> None:
    for accounting in ("Node", "Device"):
        fp = plan([*REGIONS, deployment("chat", 1), deployment("code", 1)], accounting=accounting)
        assert where(fp, "chat") == ["eu#0"]
        assert where(fp, "code") == ["us#0"]


def test_mission_5_copies_2_charges_two_nodes_and_reports_the_shortfall() -> None:
    for accounting, unit in (("Node", "node"), ("Device", "device")):
        fp = plan([*REGIONS, deployment("chat", 1, engine("main", standalone(), copies=2))],
                  accounting=accounting)
        dp = of(fp, "chat")
        assert dp.replicas == []
        assert (dp.conditions[0].status, dp.conditions[0].reason) == ("False", "InsufficientCapacity")
        assert dp.conditions[0].message == "0 of 1 replicas scheduled (checked 2 clusters)"
        assert messages(dp.unplaced[0].reasons) == {
            "eu": f"engine main: short by 1 {unit} in pool gpu",
            "us": f"engine main: short by 1 {unit} in pool gpu",
        }


def test_mission_5_with_copies_1_both_regions_serve() -> None:
    fp = plan([*REGIONS, deployment("chat", 2)])
    assert where(fp, "chat") == ["eu#0", "us#0"]


def test_previous_placement_of_a_removed_deployment_is_ignored() -> None:
    fp = plan([*TWO, deployment("m", 3)], previous=prev(("gone", "a", 0, {"main": "p1"}),
                                                        ("gone", "a", 1, {"main": "p1"})))
    assert where(fp, "m") == ["a#0", "a#1", "b#0"]
    assert fp.find("default", "gone") is None
