"""The scheduler's side of the hardening round (issue 19): each test is named after its
item and fails on the code before the fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from modelplane.__main__ import main
from modelplane.scheduler import FleetPlacement

from .helpers import (
    H100,
    cluster,
    cond,
    deployment,
    engine,
    fleet_budget,
    gpu_class,
    of,
    placement_policy,
    plan,
    pool,
    preferences,
    spread,
    standalone,
    tier,
    to_yaml,
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
    assert fourth.message == ("fits on c1 after adding 1 node to pool p (1 -> 2 nodes: raise nodeCount from 1 "
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


# -- item 10's --previous parts, and the Low item on replica indexes ------------------------

def _fleet(tmp_path: Path) -> Path:
    d = tmp_path / "fleet"
    d.mkdir()
    (d / "fleet.yaml").write_text(to_yaml([H100, cluster("a", pool("p1", "h100", 2)), deployment("m", 1)]))
    return d


def _previous(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "previous.json"
    path.write_text(text)
    return path


REPLICA = '{"name": "m-1", "index": 0, "cluster": "a", "engines": {"main": {"pool": "p1"}}}'


@pytest.mark.parametrize("document, field, expected", [
    ('{"deployments": [], "budgets": [{"name": "b", "maxDevices": 1e999}]}',
     "$.budgets[0].maxDevices", "expected an integer, got a number"),
    ('{"deployments": [], "budgets": [{"name": "b", "maxDevices": 4, "used": -1e999}]}',
     "$.budgets[0].used", "expected an integer, got a number"),
    ('{"deployments": [{"namespace": "default", "name": "m", "replicas": [' + REPLICA + '], '
     '"placementPolicy": {"spread": [{"topologyKey": "region", "groups": {"us": 1e999}}]}}]}',
     "$.deployments[0].placementPolicy.spread[0].groups.us", "expected an integer, got a number"),
    ('{"deployments": [{"namespace": "default", "name": "m", "replicas": [' + REPLICA + '], '
     '"placementPolicy": {"spread": [{"topologyKey": "region", "groups": {}, "ungrouped": 1e999}]}}]}',
     "$.deployments[0].placementPolicy.spread[0].ungrouped", "expected an integer, got a number"),
    ('{"deployments": [{"namespace": "default", "name": "m", "unplaced": [{"index": 1, "reasons": {}, '
     '"feasibility": {"verdict": "FitsAfterScaleUp", "scaleUp": {"p1": 1e999}}}]}]}',
     "$.deployments[0].unplaced[0].feasibility.scaleUp.p1", "expected an integer, got a number"),
    ('{"deployments": [{"namespace": "default", "name": "m", "replicas": [{"name": "m-1", "index": '
     + str(10**70) + ', "cluster": "a", "engines": {"main": {"pool": "p1"}}}]}]}',
     "$.deployments[0].replicas[0].index", "expected a whole number from 0 to 10000, got a 71-digit number"),
    ('{"deployments": [{"namespace": "default", "name": "m", "replicas": [{"name": "m-1", "index": -1, '
     '"cluster": "a", "engines": {"main": {"pool": "p1"}}}]}]}',
     "$.deployments[0].replicas[0].index", "expected a whole number from 0 to 10000, got -1"),
])
@pytest.mark.parametrize("command", ["plan", "render"])
def test_19_10_previous_numbers_out_of_range_are_errors_naming_the_file_and_field(
        tmp_path, capsys, command, document, field, expected):
    """`maxDevices: 1e999` and spread `groups: 1e999` raised OverflowError from plan and
    render; a replica index of 10**70 was read and written into a 71-character label."""
    fleet, previous = _fleet(tmp_path), _previous(tmp_path, document)
    argv = [command, str(fleet), *([str(tmp_path / "out")] if command == "render" else []), "--previous",
            str(previous)]
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and "Traceback" not in err
    assert f"previous placement {previous}" in err and f"{field}: {expected}" in err
    assert not (tmp_path / "out").exists()


def test_19_10_the_largest_index_a_plan_can_write_reads_back():
    from modelplane.scheduler.placement_types import MAX_REPLICA_INDEX

    doc = {"deployments": [{"namespace": "default", "name": "m", "replicas": [
        {"name": "m-1", "index": MAX_REPLICA_INDEX, "cluster": "a", "engines": {"main": {"pool": "p1"}}}]}]}
    assert FleetPlacement.from_json(doc).deployments[0].replicas[0].index == MAX_REPLICA_INDEX


# -- item 13: a FleetBudget that selects no device ------------------------------------------

def test_19_13_a_budget_naming_a_device_class_no_class_uses_is_refused_at_load(tmp_path, capsys):
    """`maxDevices: 0` with `deviceClassNames: [nvidia.com]` (a typo for gpu.nvidia.com)
    reported "0 of 0 devices used" and placed everything; lint was silent."""
    d = tmp_path / "fleet"
    d.mkdir()
    (d / "fleet.yaml").write_text(to_yaml([H100, cluster("a", pool("p1", "h100", 2)), deployment("m", 1),
                                           fleet_budget("gpus", 0, classes=["nvidia.com"])]))
    for argv in (["plan", str(d)], ["lint", str(d)], ["render", str(d), str(tmp_path / "out")]):
        assert main(argv) == 2
        out, err = capsys.readouterr()
        assert out == "" and "Traceback" not in err
        assert "fleet.yaml, document 3 (FleetBudget gpus) at spec.deviceClassNames[0]" in err
        assert ("no InferenceClass of the fleet has a DRA device of DeviceClass 'nvidia.com' (in use: "
                "gpu.nvidia.com)") in err
        assert "fix the name" in err
    assert not (tmp_path / "out").exists()


def test_19_13_a_budget_of_a_class_in_use_loads_and_binds():
    fp = plan([H100, cluster("a", pool("p1", "h100", 2)), deployment("m", 1),
               fleet_budget("gpus", 0, classes=["gpu.nvidia.com"])])
    assert of(fp, "m").replicas == []
    assert cond(fp, "m", "WithinBudget") == ("False", "BudgetExceeded")
