"""The placement JSON schema (plan --json / --previous), naming, and determinism."""

import json
import random

import pytest

from modelplane.api import load_manifest_text
from modelplane.naming import child_name, replica_name
from modelplane.scheduler import FleetPlacement, PlacementFormatError, place_fleet

from .helpers import (
    H100,
    cluster,
    deployment,
    engine,
    gang,
    gpu_class,
    load,
    of,
    plan,
    pool,
    standalone,
    to_yaml,
)


def test_child_name_matches_the_reference() -> None:
    assert child_name("modelcache", "ml-team", "qwen") == "modelcache-ml-team-qwen-17db2"


def test_replica_name_matches_the_reference() -> None:
    assert replica_name("my-model", "cluster-a", 0) == "my-model-5ab63"


def test_long_names_are_truncated_to_57_without_a_trailing_dash() -> None:
    dep = "x" * 56 + "-tail"
    name = replica_name(dep, "c", 0)
    assert name.startswith("x" * 56 + "-") and len(name) == 56 + 1 + 5
    assert len(child_name("a" * 80, "b")) == 63


FLEET = [H100, gpu_class("h100x8", 8), cluster("a", pool("p1", "h100", 2), pool("p8", "h100x8", 3)),
         cluster("b", pool("p1", "h100", 1)),
         deployment("m", 3), deployment("g", 1, gang(copies=1)),
         deployment("short", 9, engine("main", standalone(gpus=1)))]


def test_json_schema_shape() -> None:
    doc = plan(FLEET).to_json()
    d = doc["deployments"][0]
    assert list(doc) == ["deployments"]
    assert list(d) == ["namespace", "name", "desired", "replicas", "conditions", "unplaced"]
    assert list(d["replicas"][0]) == ["name", "index", "cluster", "engines"]
    assert list(d["replicas"][0]["engines"]["main"]) == ["pool", "members", "requests"]
    assert list(d["conditions"][0]) == ["type", "status", "reason", "message"]
    short = next(x for x in doc["deployments"] if x["name"] == "short")
    assert list(short["unplaced"][0]) == ["index", "refusals", "feasibility"]
    assert list(short["unplaced"][0]["refusals"]) == ["clusters", "groups"]
    assert list(short["unplaced"][0]["refusals"]["groups"][0]) == ["plugin", "code", "kind", "clusters", "examples"]
    assert [x["name"] for x in doc["deployments"]] == ["g", "m", "short"]


def test_json_round_trip() -> None:
    fp = plan(FLEET)
    text = json.dumps(fp.to_json())
    assert FleetPlacement.from_json(json.loads(text)).to_json() == fp.to_json()


def test_unplaced_replicas_write_their_shared_refusals_once() -> None:
    fp = plan(FLEET)
    short = next(x for x in fp.to_json()["deployments"] if x["name"] == "short")
    first, *rest = short["unplaced"]
    assert rest, "the fleet should leave several replicas of `short` unplaced"
    assert first["refusals"] and all("refusals" not in u and u["reasonsOf"] == first["index"] for u in rest)
    back = FleetPlacement.from_json(json.loads(json.dumps(fp.to_json()))).find("default", "short")
    placed = fp.find("default", "short")
    assert back is not None and placed is not None
    assert all(u.refusals == placed.unplaced[0].refusals for u in back.unplaced)
    assert [u.refusals.to_json() for u in back.unplaced] == [first["refusals"]] * len(back.unplaced)


def test_reasons_of_an_unknown_replica_is_a_format_error() -> None:
    doc = plan(FLEET).to_json()
    short = next(x for x in doc["deployments"] if x["name"] == "short")
    short["unplaced"][1]["reasonsOf"] = 999
    with pytest.raises(PlacementFormatError, match="reasonsOf"):
        FleetPlacement.from_json(doc)


def test_previous_without_members_puts_every_member_on_pool() -> None:
    doc = plan(FLEET).to_json()
    for d in doc["deployments"]:
        for r in d["replicas"]:
            for e in r["engines"].values():
                del e["members"]
    again = place_fleet(load(FLEET), previous=FleetPlacement.from_json(doc), accounting="Node")
    assert again.to_json() == plan(FLEET).to_json()
    assert of(again, "g").replicas[0].engines["main"].member_pools == ("p8", "p8")


@pytest.mark.parametrize("doc", [
    {}, {"deployments": {}}, {"deployments": [{"name": "m"}]},
    {"deployments": [{"namespace": "d", "name": "m", "replicas": [{"name": "x", "index": "0",
                                                                  "cluster": "a", "engines": {}}]}]},
    {"deployments": [{"namespace": "d", "name": "m", "replicas": [{"name": "x", "index": 0,
                                                                  "cluster": "a", "engines": {"e": {}}}]}]},
])
def test_malformed_previous_is_rejected(doc) -> None:
    with pytest.raises(PlacementFormatError):
        FleetPlacement.from_json(doc)


@pytest.mark.parametrize("accounting", ["Node", "Device"])
def test_same_inputs_same_bytes_whatever_the_document_order(accounting) -> None:
    want = json.dumps(plan(FLEET, accounting=accounting).to_json())
    rng = random.Random(7)
    for _ in range(5):
        docs = list(FLEET)
        rng.shuffle(docs)
        fleet = load_manifest_text(to_yaml(docs))
        assert json.dumps(place_fleet(fleet, accounting=accounting).to_json()) == want


def test_replanning_from_its_own_output_is_a_fixed_point() -> None:
    for accounting in ("Node", "Device"):
        first = plan(FLEET, accounting=accounting)
        again = plan(FLEET, previous=FleetPlacement.from_json(first.to_json()), accounting=accounting)
        assert again.to_json() == first.to_json()


def test_unknown_accounting_mode_is_an_error() -> None:
    with pytest.raises(ValueError):
        place_fleet(load(FLEET), accounting="GPU")


def test_placing_leaves_the_garbage_collector_as_it_found_it() -> None:
    import gc

    was = gc.isenabled()
    try:
        for state in (True, False):
            (gc.enable if state else gc.disable)()
            plan(FLEET)
            assert gc.isenabled() is state
    finally:
        (gc.enable if was else gc.disable)()
