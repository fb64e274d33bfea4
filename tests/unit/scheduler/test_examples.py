"""The scheduler example fleets under examples/scheduler-*/ plan as their comments say."""

import json
from pathlib import Path

import pytest

from modelplane.api import load_manifests
from modelplane.scheduler import FleetPlacement, place_fleet
from modelplane.scheduler.reasons import messages

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def placed(fp: FleetPlacement) -> dict[str, list[str]]:
    return {d.name: [f"{r.cluster}#{r.index}" for r in d.replicas] for d in fp.deployments}


def test_packing_device_vs_node() -> None:
    fleet = load_manifests(EXAMPLES / "scheduler-packing")
    assert placed(place_fleet(fleet, accounting="Device")) == {
        "batch": ["lab#0"], "chat": ["lab#0", "lab#1", "lab#2", "lab#3"], "embed": ["lab#0", "lab#1"]}
    assert placed(place_fleet(fleet, accounting="Node")) == {
        "batch": ["lab#0"], "chat": ["lab#0"], "embed": []}


@pytest.mark.parametrize("accounting", ["Device", "Node"])
def test_fabric_spanning(accounting) -> None:
    fp = place_fleet(load_manifests(EXAMPLES / "scheduler-fabric"), accounting=accounting)
    dp = fp.find("ml-team", "deepseek")
    assert [(r.cluster, r.engines["main"].member_pools) for r in dp.replicas] == [
        ("east", ("coord", "gpu")), ("east", ("coord", "gpu"))]
    assert dp.conditions[0].reason == "ReplicasCreated"


def test_drain() -> None:
    d = EXAMPLES / "scheduler-drain"
    previous = FleetPlacement.from_json(json.loads((d / "previous.json").read_text()))
    fp = place_fleet(load_manifests(d), previous=previous)
    assert placed(fp) == {"chat": ["us-east#0", "us-east#1"], "chat-canary": ["eu-west#0"]}
    chat = fp.find("ml-team", "chat")
    assert messages(chat.unplaced[0].reasons) == {
        "ap-south": "untolerated taint upgrade=1.35:NoSchedule",
        "eu-west": "untolerated taint maint:NoExecute",
        "us-east": "engine main: short by 1 device in pool gpu",
    }


# Placement policies (issue 14): one example fleet per feature ---------------------


def verdicts(fp: FleetPlacement) -> dict[str, list[str]]:
    return {d.name: [u.feasibility.verdict for u in d.unplaced] for d in fp.deployments if d.unplaced}


def test_policy_spread() -> None:
    fp = place_fleet(load_manifests(EXAMPLES / "policy-spread"))
    assert placed(fp) == {"chat": ["east-1#0", "west-1#0"], "embed": ["east-1#0", "east-2#0"]}
    assert verdicts(fp) == {"embed": ["Blocked"]}
    assert [c.status for c in fp.find("ml-team", "chat").conditions] == ["True", "True"]


def test_policy_preferences_overflow_and_return() -> None:
    d = EXAMPLES / "policy-preferences"
    fleet = load_manifests(d)
    assert placed(place_fleet(fleet)) == {"chat": ["onprem#0", "onprem#1", "onprem#2"]}
    fp = place_fleet(fleet, observed=json.loads((d / "outage.json").read_text()))
    assert placed(fp) == {"chat": ["cloud#0", "cloud#1", "onprem#0"]}
    seen = []
    for _ in range(5):
        fp = place_fleet(fleet, previous=FleetPlacement.from_json(json.loads(json.dumps(fp.to_json()))))
        seen.append((placed(fp)["chat"], fp.find("ml-team", "chat").condition("PreferencesHonored").reason))
    assert seen == [
        (["cloud#0", "cloud#1", "onprem#0"], "ReturnPending"),
        (["cloud#0", "cloud#1", "onprem#0", "onprem#1"], "Moving"),
        (["cloud#0", "onprem#0", "onprem#1", "onprem#2"], "Moving"),
        (["onprem#0", "onprem#1", "onprem#2"], "Preferred"),
        (["onprem#0", "onprem#1", "onprem#2"], "Preferred"),
    ]


def test_policy_budget() -> None:
    fp = place_fleet(load_manifests(EXAMPLES / "policy-budget"))
    assert placed(fp) == {"chat": ["east#0", "west#0"], "summarize": ["east#0", "west#0"], "train": ["east#0"]}
    assert verdicts(fp) == {"summarize": ["Blocked"]}
    assert [(b.name, b.used, b.max_devices, b.refused) for b in fp.budgets] == [
        ("ml-team-gpus", 12, 12, 1), ("research", 8, 8, 0)]


def test_policy_feasibility() -> None:
    d = EXAMPLES / "policy-feasibility"
    fp = place_fleet(load_manifests(d), observed=json.loads((d / "observed.json").read_text()))
    assert verdicts(fp) == {"big": ["FitsAfterScaleUp"], "huge": ["NotFeasible"], "pinned": ["Blocked"]}
    (big,) = fp.find("ml-team", "big").unplaced
    assert (big.feasibility.cluster, dict(big.feasibility.scale_up)) == ("autoscaled", {"gpu": 1})
    assert "within maxNodeCount 4: the autoscaler can add them" in big.feasibility.message
    assert verdicts(place_fleet(load_manifests(d))) == {"huge": ["NotFeasible"], "pinned": ["Blocked"]}


def test_capacity_weighting() -> None:
    from modelplane.gateway.fleet import fleet_routes, placement_endpoints

    fleet = load_manifests(EXAMPLES / "capacity-weighting")
    (route,) = fleet_routes(fleet, placement_endpoints(fleet, place_fleet(fleet)))
    assert [(b.endpoint.deployment, b.weight) for b in route.backends] == [("chat-big", 3), ("chat-small", 1)]
