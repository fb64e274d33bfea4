"""Pool matching (semantics §2.4, §2.5): mirrors the reference's TestScheduleNodeSelector
and TestScheduleMembers tables, plus the matching worked examples of §2.10."""

import pytest

from modelplane.cel import SelectorResult
from modelplane.scheduler import place_fleet, resolve_member_requests
from modelplane.scheduler.matching import Matcher, MemberMatch, NoMatch
from modelplane.scheduler.shape import ClassView, DeviceKind, MemberShape, RequestShape

from .helpers import (
    H100,
    Case,
    check,
    cluster,
    deployment,
    device,
    engine,
    gang,
    gpu_class,
    inference_class,
    load,
    mem_at_least,
    member,
    of,
    pool,
    prev,
    request,
    standalone,
)

NIC = 'device.driver == "nic.nvidia.com"'
IB_CLASS = inference_class("h100-ib", device("gpu", 8, "81559Mi"),
                           device("nic", 8, "0", claim="Synthetic", driver="nic.nvidia.com"))
H100x8 = gpu_class("h100x8", 8, "81559Mi")
L4 = gpu_class("l4", 1, "23034Mi")
H200x8 = gpu_class("h200x8", 8, "140Gi")
GPU_AND_NIC = member("Standalone", request("gpu", 1, mem_at_least(40)), request("nic", 1, NIC))


def one(*pools: dict, cls: list[dict] | None = None) -> list[dict]:
    return [*(cls or [H100]), cluster("a", *pools)]


SELECTOR_CASES = [
    Case("matching request records its pool", [*one(pool("p1", "h100")), deployment("m")],
         {"m": ["a#0"]}, pools={"m": [("p1",)]}),
    Case("non-matching request filters the pool",
         [*one(pool("small", "l4"), cls=[L4]), deployment("m")], {"m": []},
         reasons={"m": "InsufficientCapacity"}),
    Case("device count not covered filters the pool",
         [*one(pool("p1", "h100")), deployment("m", 1, engine("main", standalone(gpus=2)))],
         {"m": []}),
    Case("pool with nodeCount 0 hosts nothing",
         [*one(pool("p1", "h100", 0)), deployment("m")], {"m": []}),
    Case("synthetic NIC is matched but not resolved",
         [*one(pool("ib", "h100-ib"), cls=[IB_CLASS]), deployment("m", 1, engine("main", GPU_AND_NIC))],
         {"m": ["a#0"]}, pools={"m": [("ib",)]}),
    Case("missing NIC filters the pool",
         [*one(pool("plain", "h100x8"), pool("ib", "h100-ib"), cls=[H100x8, IB_CLASS]),
          deployment("m", 1, engine("main", GPU_AND_NIC))],
         {"m": ["a#0"]}, pools={"m": [("ib",)]}),
    Case("two requests cannot share a single-count device",
         [*one(pool("p1", "h100")),
          deployment("m", 1, engine("main", member("Standalone", request("x"), request("y"))))],
         {"m": []}),
    Case("a request must fit within one device kind's count",
         [*one(pool("p1", "h100x2"), cls=[gpu_class("h100x2", 2)]),
          deployment("m", 1, engine("main", standalone(gpus=3)))], {"m": []}),
    Case("two requests fit when the count covers both",
         [*one(pool("p1", "h100x2"), cls=[gpu_class("h100x2", 2)]),
          deployment("m", 1, engine("main", member("Standalone", request("x"), request("y"))))],
         {"m": ["a#0"]}),
    Case("first matching pool wins, even if a later one fits too (worked example 7)",
         [*one(pool("small", "l4", 4), pool("big", "h200x8", 1), cls=[L4, H200x8]),
          deployment("m16", 1, engine("main", standalone(min_gib=16))),
          deployment("m80", 1, engine("main", standalone(min_gib=80)))],
         {"m16": ["a#0"], "m80": ["a#0"]}, pools={"m16": [("small",)], "m80": [("big",)]}),
    Case("synthetic-only class is never schedulable (worked example 9)",
         [*one(pool("p1", "synth"), cls=[inference_class("synth", device("gpu", 1, claim="Synthetic"))]),
          deployment("m")], {"m": []}, reasons={"m": "InsufficientCapacity"}),
    Case("retained replica keeps its pinned pool",
         [*one(pool("small", "l4", 4), pool("big", "h200x8", 1), cls=[L4, H200x8]),
          deployment("m", 1, engine("main", standalone(min_gib=16)))],
         {"m": ["a#0"]}, pools={"m": [("big",)]}, previous=prev(("m", "a", 0, {"main": "big"}))),
    Case("selector edit re-places onto a matching pool, same identity (worked example 11)",
         [*one(pool("p80", "h100"), pool("p141", "h200x8"), cls=[H100, H200x8]),
          deployment("m", 1, engine("main", standalone(min_gib=100)))],
         {"m": ["a#0"]}, pools={"m": [("p141",)]}, previous=prev(("m", "a", 0, {"main": "p80"}))),
    Case("attribute drift that still matches is sticky",
         [*one(pool("p80", "h100"), cls=[gpu_class("h100", 1, "79Gi")]), deployment("m")],
         {"m": ["a#0"]}, pools={"m": [("p80",)]}, previous=prev(("m", "a", 0, {"main": "p80"}))),
    Case("no matching pool: the replica is dropped",
         [*one(pool("p80", "h100")), deployment("m", 1, engine("main", standalone(min_gib=200)))],
         {"m": []}, reasons={"m": "InsufficientCapacity"},
         previous=prev(("m", "a", 0, {"main": "p80"}))),
    Case("replica without pool pins is re-placed",
         [*one(pool("p1", "h100")), deployment("m")], {"m": ["a#0"]}, pools={"m": [("p1",)]},
         previous=prev(("m", "a", 0, {}))),
    Case("dropping a non-matching replica frees its node for the refill",
         [*one(pool("p1", "h100")), deployment("m", 1, engine("renamed"))], {"m": ["a#0"]},
         previous=prev(("m", "a", 0, {"main": "p1"}))),
    Case("device count is checked per pool, not per cluster",
         [*one(pool("p1", "h100", 4), pool("p2", "h100", 4)),
          deployment("m", 1, engine("main", standalone(gpus=2)))], {"m": []}),
]

MEMBER_CASES = [
    Case("one pool hosts the whole engine",
         [*one(pool("p1", "h100x8", 3), cls=[H100x8]), deployment("m", 1, gang())],
         {"m": ["a#0"]}, pools={"m": [("p1", "p1")]}),
    Case("members no single pool satisfies are rejected",
         [*one(pool("ib", "h100-ib", 3), pool("big", "h200x8", 3), cls=[IB_CLASS, H200x8]),
          deployment("m", 1, engine("main",
                                    member("Leader", request("nic", 1, NIC)),
                                    member("Worker", request("gpu", 8, mem_at_least(100)), nodes=2)))],
         {"m": []}),
    Case("gang too big for its only pool is rejected (worked example 4)",
         [*one(pool("p1", "h100x8", 5), cls=[H100x8]), deployment("m", 1, gang(copies=2))],
         {"m": []}, reasons={"m": "InsufficientCapacity"}),
    Case("gang of cost 6 fits a pool of 6 (worked example 4)",
         [*one(pool("p1", "h100x8", 6), cls=[H100x8]), deployment("m", 1, gang(copies=2))],
         {"m": ["a#0"]}, pools={"m": [("p1", "p1")]}),
    Case("gang lands whole on another cluster",
         [H100x8, cluster("a", pool("p1", "h100x8", 5)), cluster("b", pool("p1", "h100x8", 6)),
          deployment("m", 1, gang(copies=2))], {"m": ["b#0"]}),
    Case("claim-capable member is not stranded on a synthetic match",
         [*one(pool("s", "synth"), pool("r", "h100"),
               cls=[H100, inference_class("synth", device("gpu", 1, claim="Synthetic"))]),
          deployment("m")], {"m": ["a#0"]}, pools={"m": [("r",)]}),
    Case("synthetic-only member is placed claimless with its gang, at zero cost",
         [*one(pool("ib", "h100-ib", 2), cls=[IB_CLASS]),
          deployment("m", 1, engine("main", member("Leader", request("nic", 1, NIC)),
                                    member("Worker", request("gpu", 8, mem_at_least(40)), nodes=2)))],
         {"m": ["a#0"]}, pools={"m": [("ib", "ib")]}),
    Case("member matching nowhere fails the replica",
         [*one(pool("p1", "h100x8", 4), cls=[H100x8]),
          deployment("m", 1, engine("main", member("Leader", request("nic", 1, NIC)),
                                    member("Worker", request("gpu", 8, mem_at_least(40)), nodes=2)))],
         {"m": []}),
    Case("claimless leader rides along at zero cost: pool of 2 rejects (worked example 5)",
         [*one(pool("p1", "h100x8", 2), cls=[H100x8]),
          deployment("m", 1, gang(leader_gpus=None, worker_nodes=3))], {"m": []}),
    Case("claimless leader rides along at zero cost: pool of 3 accepts (worked example 5)",
         [*one(pool("p1", "h100x8", 3), cls=[H100x8]),
          deployment("m", 1, gang(leader_gpus=None, worker_nodes=3))],
         {"m": ["a#0"]}, pools={"m": [("p1", "p1")]}),
    Case("retained claimless member keeps its pin",
         [*one(pool("p1", "h100x8", 3), cls=[H100x8]),
          deployment("m", 1, gang(leader_gpus=None, worker_nodes=3))],
         {"m": ["a#0"]}, pools={"m": [("p1", "p1")]},
         previous=prev(("m", "a", 0, {"main": ["p1", "p1"]}))),
    Case("another deployment's claimless member consumes nothing",
         [*one(pool("p1", "h100x8", 4), cls=[H100x8]),
          deployment("a-gang", 1, gang(leader_gpus=None, worker_nodes=3)), deployment("b-one", 1)],
         {"a-gang": ["a#0"], "b-one": ["a#0"]}),
    Case("member shape change re-places the replica",
         [*one(pool("p1", "h100x8", 3), pool("p2", "h100x8", 3), cls=[H100x8]),
          deployment("m", 1, gang())], {"m": ["a#0"]}, pools={"m": [("p1", "p1")]},
         previous=prev(("m", "a", 0, {"main": ["p2"]}))),
]


@pytest.mark.parametrize("case", SELECTOR_CASES, ids=[c.name for c in SELECTOR_CASES])
def test_node_selector(case: Case) -> None:
    check(case)


@pytest.mark.parametrize("case", MEMBER_CASES, ids=[c.name for c in MEMBER_CASES])
def test_members(case: Case) -> None:
    check(case)


def test_synthetic_matches_resolve_nothing() -> None:
    fleet = load([*one(pool("ib", "h100-ib"), cls=[IB_CLASS]),
                  deployment("m", 1, engine("main", GPU_AND_NIC))])
    got = resolve_member_requests(fleet, fleet.deployments[("default", "m")], "main", 0,
                                  fleet.clusters["a"].pool("ib").class_name)
    assert [(r.name, r.device_class_name, r.count) for r in got] == [("gpu", "gpu.nvidia.com", 1)]


class _AllMatch:
    def result(self, *args: object) -> SelectorResult:
        return SelectorResult(True)


def test_published_device_count_zero_matches_nothing() -> None:
    # The API forbids count 0; a published 0 (or a negative) is still read as "none".
    cls = ClassView("c", (DeviceKind("gpu", True, "gpu", 0, "d", {}, {}),))
    m = MemberShape(0, "Standalone", 1, 1, (RequestShape("gpu", 1, ("true",)),))
    got = Matcher(_AllMatch()).match(m, cls)
    assert isinstance(got, NoMatch)
    assert "too few" in str(got)


def test_greedy_matching_takes_the_first_device_in_class_order() -> None:
    cls = ClassView("c", (DeviceKind("a", True, "ca", 1, "d", {}, {}),
                          DeviceKind("b", True, "cb", 1, "d", {}, {})))
    m = MemberShape(0, "Standalone", 1, 1, (RequestShape("x", 1, ("true",)),
                                            RequestShape("y", 1, ("true",))))
    got = Matcher(_AllMatch()).match(m, cls)
    assert isinstance(got, MemberMatch)
    assert [(r.name, r.device_class_name) for r in got.resolved] == [("x", "ca"), ("y", "cb")]
    assert got.per_pod == (1, 1)


def test_invalid_cel_gives_invalid_node_selector_and_holds_replicas() -> None:
    fleet = load([*one(pool("p1", "h100")), deployment("m")])
    # The loader rejects bad CEL; the scheduler must still fail safely if handed one.
    dep = fleet.deployments[("default", "m")]
    dep.spec.template.spec.engines[0].members[0].node_selector.devices[0].selectors[0].cel = "device.("
    fp = place_fleet(fleet, previous=prev(("m", "a", 0, {"main": "p1"})), accounting="Node")
    cond = of(fp, "m").conditions[0]
    assert (cond.status, cond.reason) == ("False", "InvalidNodeSelector")
    assert "engine 'main'" in cond.message and "request 'gpu'" in cond.message
    assert [r.cluster for r in of(fp, "m").replicas] == ["a"]
