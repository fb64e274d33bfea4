"""The scheduler example fleets under examples/scheduler-*/ plan as their comments say."""

import json
from pathlib import Path

import pytest

from modelplane.api import load_manifests
from modelplane.scheduler import FleetPlacement, place_fleet

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
    assert chat.unplaced[0].reasons == {
        "ap-south": "untolerated taint upgrade=1.35:NoSchedule",
        "eu-west": "untolerated taint maint:NoExecute",
        "us-east": "engine main: short by 1 device in pool gpu",
    }
