"""Fabric-aware spanning (reference issue #149): an engine's members may use different
pools of one cluster only when those pools share a non-empty fabric.domain."""

import pytest

from .helpers import (
    Case,
    check,
    cluster,
    deployment,
    device,
    engine,
    gpu_class,
    inference_class,
    mem_at_least,
    member,
    of,
    plan,
    pool,
    prev,
    request,
    where,
)

CPU = inference_class("cpu", device("cpu", 1, "0", claim="Synthetic", driver="cpu.modelplane.ai"))
H8 = gpu_class("h100x8", 8, "81559Mi")
BOTH = inference_class("both", device("gpu", 8, "81559Mi"),
                       device("cpu", 1, "0", claim="Synthetic", driver="cpu.modelplane.ai"))
ON_CPU = 'device.driver == "cpu.modelplane.ai"'
COORDINATED = engine("main", member("Leader", request("cpu", 1, ON_CPU)),
                     member("Worker", request("gpu", 8, mem_at_least(40)), nodes=2))


def fleet(cpu_domain, gpu_domain, gpu_nodes=2, extra=()) -> list[dict]:
    return [CPU, H8, BOTH,
            cluster("a", pool("coord", "cpu", 1, domain=cpu_domain),
                    pool("gpu", "h100x8", gpu_nodes, domain=gpu_domain), *extra)]


CASES = [
    Case("members span pools of one fabric domain",
         [*fleet("ib-1", "ib-1"), deployment("m", 1, COORDINATED)],
         {"m": ["a#0"]}, pools={"m": [("coord", "gpu")]}),
    Case("pools of different domains do not host one engine",
         [*fleet("ib-1", "ib-2"), deployment("m", 1, COORDINATED)], {"m": []},
         reasons={"m": "InsufficientCapacity"}),
    Case("pools without a domain never span (the reference)",
         [*fleet(None, None), deployment("m", 1, COORDINATED)], {"m": []}),
    Case("a single pool hosting every member is preferred to spanning",
         [*fleet("ib-1", "ib-1", extra=(pool("combo", "both", 3),)), deployment("m", 1, COORDINATED)],
         {"m": ["a#0"]}, pools={"m": [("combo", "combo")]}),
    Case("spanning is charged per member pool",
         [*fleet("ib-1", "ib-1", gpu_nodes=3), deployment("m", 2, COORDINATED)],
         {"m": ["a#0"]}, pools={"m": [("coord", "gpu")]}, reasons={"m": "PartialCapacity"}),
    Case("a retained spanning replica keeps its pools",
         [*fleet("ib-1", "ib-1"), deployment("m", 1, COORDINATED)],
         {"m": ["a#0"]}, pools={"m": [("coord", "gpu")]},
         previous=prev(("m", "a", 0, {"main": ["coord", "gpu"]}))),
]


@pytest.mark.parametrize("accounting", ["Node", "Device"])
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_fabric(case: Case, accounting: str) -> None:
    check(Case(case.name, case.docs, case.want, case.previous, accounting, case.reasons, case.pools))


def test_engine_pool_is_the_first_claiming_members_pool() -> None:
    fp = plan([*fleet("ib-1", "ib-1"), deployment("m", 1, COORDINATED)])
    placed = of(fp, "m").replicas[0].engines["main"]
    assert (placed.pool, placed.member_pools) == ("gpu", ("coord", "gpu"))


def test_spanning_replica_is_moved_when_its_pools_leave_the_domain() -> None:
    fp = plan([*fleet("ib-1", "ib-2", extra=(pool("combo", "both", 3),)),
               deployment("m", 1, COORDINATED)],
              previous=prev(("m", "a", 0, {"main": ["coord", "gpu"]})))
    assert where(fp, "m") == ["a#0"]
    assert of(fp, "m").replicas[0].engines["main"].member_pools == ("combo", "combo")
    assert "no longer share a fabric domain" in of(fp, "m").dropped[0][1].message


def test_rejection_reason_lists_each_pool() -> None:
    fp = plan([*fleet("ib-1", "ib-2"), deployment("m", 1, COORDINATED)])
    why = of(fp, "m").unplaced[0].reasons["a"].message
    assert why.startswith("no pool for engine main: ")
    # the memory selector cannot even evaluate on the coord pool's only device (a CPU)
    assert "pool coord: member 1 (Worker) request 'gpu' selector #0 errored on device cpu: no such key: memory" in why
    assert "pool gpu: member 0 (Leader) request 'cpu' matched no device" in why
