"""gang-zones: a multi-node gang copy's nodes come from one zone of its pools, and the scheduler
charges gangs per zone (modelplane.scheduler.plugins.gang_zones, modelplane.clouds.zones).

What a zone holds: an EKS managed node group's Auto Scaling group "attempts to distribute
instances evenly between the Availability Zones that are enabled" (EC2 Auto Scaling user guide,
"Availability Zone rebalancing"), AWS choosing which zones get the remainder, so each zone is
sure of nodes // zones; a fixed GKE pool's `node_count` is "the number of nodes per instance
group" (google_container_node_pool), so each zone holds nodeCount / zones; an autoscaled GKE
pool gets total limits with location policy ANY, which caps no zone below the pool.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from modelplane.scheduler import reasons as codes
from modelplane.scheduler.cycle import Keeping, Reservation
from modelplane.scheduler.ledger import Trial
from modelplane.scheduler.plugins.device_fit import DeviceFit
from modelplane.scheduler.plugins.gang_zones import GangZones
from modelplane.scheduler.policy_types import FITS_AFTER_SCALE_UP, NOT_FEASIBLE

from .helpers import (
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
    request,
)
from .test_plugins import binding, cycle_of, ledger_ready

GKE = {"source": "GKE", "gke": {"region": "us-central1"}}
EKS = {"source": "EKS", "eks": {"region": "us-east-1"}}
GA, GB, GC = "us-central1-a", "us-central1-b", "us-central1-c"
EA, EB = "us-east-1a", "us-east-1b"


def gang(workers: int = 1, copies: int = 1, gpus: int = 8) -> dict[str, Any]:
    """A Leader + Worker engine: 1 + `workers` nodes of 8-GPU pods per copy."""
    r = request("gpu", gpus, mem_at_least(40))
    return engine("main", member("Leader", r), member("Worker", r, nodes=workers), copies=copies)


def fleet(source: dict[str, Any], *pools: dict[str, Any], replicas: int = 1,
          eng: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    return [gpu_class("h100", 8), gpu_class("h100-small", 1), cluster("c", *pools, source=source),
            deployment("m", replicas, eng or gang())]


def split_fleet() -> list[dict[str, Any]]:
    """A gang whose leader runs on a CPU pool and its worker on a GPU pool of the same fabric
    domain (docs/scheduler.md, "Which pool"), the two pools in different zones."""
    cpu = inference_class("cpu", device("cpu", 1, "0", claim="Synthetic", driver="cpu.modelplane.ai"))
    coordinated = engine("main", member("Leader", request("cpu", 1, 'device.driver == "cpu.modelplane.ai"')),
                         member("Worker", request("gpu", 8, mem_at_least(40)), nodes=1))
    return [cpu, gpu_class("h100", 8),
            cluster("c", pool("coord", "cpu", 2, domain="ib-1", zones=[GA, GB]),
                    pool("gpu", "h100", 2, domain="ib-1", zones=[GC]),
                    source=GKE),
            deployment("m", 1, coordinated)]


@dataclass(frozen=True)
class Case:
    name: str
    docs: list[dict[str, Any]]
    placed: int                                  # replicas placed
    zones: list[list[str]] = field(default_factory=list)   # per placed replica, its copies' zones
    code: str | None = None                      # the refusal code on cluster c, if any replica is unplaced
    words: tuple[str, ...] = ()                  # in that refusal's message


CASES = [
    Case("gke-fixed-one-node-per-zone-refuses-a-2-node-gang",
         fleet(GKE, pool("p", "h100", 2, zones=[GA, GB])), 0, code=codes.ZONE_SHORTFALL,
         words=("engine main: a copy needs 2 nodes in one zone of pool p; its zones have at most 1 node free "
                f"({GA}: 1 of 1, {GB}: 1 of 1)",)),
    Case("gke-fixed-two-nodes-per-zone-fits-one-copy-per-zone",
         fleet(GKE, pool("p", "h100", 4, zones=[GA, GB]), replicas=2), 2, [[GA], [GB]]),
    Case("gke-fixed-two-nodes-per-zone-a-third-copy-is-refused-by-the-pool",
         fleet(GKE, pool("p", "h100", 4, zones=[GA, GB]), replicas=3), 2, [[GA], [GB]],
         code=codes.INSUFFICIENT_CAPACITY),
    Case("gke-one-zone-is-no-zone-choice",
         fleet(GKE, pool("p", "h100", 2, zones=[GA])), 1, [[]]),
    Case("eks-uneven-three-nodes-over-two-zones-each-zone-sure-of-one",
         fleet(EKS, pool("p", "h100", 3, zones=[EA, EB])), 0, code=codes.ZONE_SHORTFALL,
         words=(f"({EA}: 1 of 1, {EB}: 1 of 1)",)),
    Case("eks-pool-without-zones-spans-the-clusters-two",
         fleet(EKS, pool("p", "h100", 3)), 0, code=codes.ZONE_SHORTFALL, words=(f"{EA}: 1 of 1",)),
    Case("eks-five-nodes-over-two-zones-holds-two-copies",
         fleet(EKS, pool("p", "h100", 5, zones=[EA, EB]), replicas=2), 2, [[EA], [EB]]),
    Case("gke-autoscaled-total-limits-cap-no-zone",
         fleet(GKE, pool("p", "h100", 2, 4, zones=[GA, GB]), replicas=2), 2, [[GA], [GB]]),
    Case("copies-of-one-replica-share-a-zone-when-one-holds-them",
         fleet(GKE, pool("p", "h100", 8, zones=[GA, GB]), eng=gang(copies=2)), 1, [[GA, GA]]),
    Case("copies-go-zone-by-zone-when-no-zone-holds-them-all",
         fleet(GKE, pool("p", "h100", 6, zones=[GA, GB, GC]), eng=gang(copies=3)), 1, [[GA, GB, GC]]),
    Case("a-copy-fits-no-zone-names-each-of-the-copies",
         fleet(GKE, pool("p", "h100", 6, zones=[GA, GB, GC]), eng=gang(workers=2, copies=2)), 0,
         code=codes.ZONE_SHORTFALL, words=("each of its 2 copies needs 3 nodes in one zone of pool p",)),
    Case("standalone-engines-charge-no-zone",
         [gpu_class("h100", 8), cluster("c", pool("p", "h100", 2, zones=[GA, GB]), source=GKE),
          deployment("m", 2, engine("main", member("Standalone", request("gpu", 8, mem_at_least(40)))))],
         2, [[], []]),
    Case("kind-pools-have-no-zones",
         [gpu_class("h100", 8), cluster("c", pool("p", "h100", 2, zones=[GA, GB])), deployment("m", 1, gang())],
         1, [[]]),
    Case("a-gang-whose-pools-share-no-zone",
         split_fleet(), 0, code=codes.NO_COMMON_ZONE,
         words=(f"engine main: its pools share no zone (coord: {GA}, {GB}; gpu: {GC})",)),
]


@pytest.mark.parametrize("accounting", ["Node", "Device"])
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_gang_zones(case: Case, accounting: str) -> None:
    placed = of(plan(case.docs, accounting=accounting), "m")
    assert len(placed.replicas) == case.placed, placed.unplaced
    assert [list(r.engines["main"].zones) for r in placed.replicas] == (case.zones or [[]] * case.placed)
    if case.code is None:
        assert placed.unplaced == []
        return
    why = placed.unplaced[0].reasons["c"]
    assert why.code == case.code, why
    # no size of the cluster answers pools without a common zone; more nodes answer a shortfall
    assert why.kind == (codes.NEVER if case.code == codes.NO_COMMON_ZONE else codes.CAPACITY), why
    for words in case.words:
        if accounting == "Device":
            words = words.replace("2 nodes in one zone", "16 devices on 2 nodes in one zone").replace(
                "3 nodes in one zone", "24 devices on 3 nodes in one zone")
            words = words.replace("at most 1 node free", "at most 8 devices free")
            words = words.replace(": 1 of 1", ": 8 of 8")
        assert words in why.message, why


@dataclass(frozen=True)
class GrowCase:
    name: str
    docs: list[dict[str, Any]]
    verdict: str
    scale_up: dict[str, int] = field(default_factory=dict)
    words: str = ""


GROW = [
    GrowCase("gke-fixed-grows-by-a-node-per-zone", fleet(GKE, pool("p", "h100", 2, zones=[GA, GB])),
             FITS_AFTER_SCALE_UP, {"p": 2}, "after adding 2 nodes to pool p (2 -> 4 nodes"),
    GrowCase("eks-uneven-grows-to-the-next-multiple", fleet(EKS, pool("p", "h100", 3, zones=[EA, EB])),
             FITS_AFTER_SCALE_UP, {"p": 1}, "(3 -> 4 nodes"),
    GrowCase("three-zones-three-node-gang", fleet(GKE, pool("p", "h100", 3, zones=[GA, GB, GC]), eng=gang(workers=2)),
             FITS_AFTER_SCALE_UP, {"p": 6}, "(3 -> 9 nodes"),
    GrowCase("second-replica-counts-the-first-scale-up",
             fleet(GKE, pool("p", "h100", 2, zones=[GA, GB]), replicas=2), FITS_AFTER_SCALE_UP, {"p": 2}),
    GrowCase("no-common-zone-never-fits",
             split_fleet(), NOT_FEASIBLE, words="share no zone"),
]


@pytest.mark.parametrize("accounting", ["Node", "Device"])
@pytest.mark.parametrize("case", GROW, ids=[c.name for c in GROW])
def test_feasibility_of_a_zone_shortfall(case: GrowCase, accounting: str) -> None:
    unplaced = of(plan(case.docs, accounting=accounting), "m").unplaced
    verdict = unplaced[0].feasibility
    assert verdict is not None and verdict.verdict == case.verdict, verdict
    assert dict(verdict.scale_up) == case.scale_up
    assert case.words in verdict.message


def test_second_replica_scale_up_is_counted_after_the_first() -> None:
    """Two 2-node gangs on a GKE pool of one node per zone: the first needs 2 -> 4 nodes, the
    second fits on what that adds (a copy in each zone), so it needs no more."""
    unplaced = of(plan(fleet(GKE, pool("p", "h100", 2, zones=[GA, GB]), replicas=2)), "m").unplaced
    assert [u.feasibility.scale_up for u in unplaced if u.feasibility] == [{"p": 2}, {"p": 2}]
    assert "counting the unplaced replicas before it" in unplaced[1].feasibility.message  # type: ignore[union-attr]


def test_the_scaled_up_fleet_places_what_feasibility_promised() -> None:
    """FitsAfterScaleUp is a promise: the pool at the size it names places the replica."""
    for docs, grown in [(fleet(GKE, pool("p", "h100", 2, zones=[GA, GB])), pool("p", "h100", 4, zones=[GA, GB])),
                        (fleet(EKS, pool("p", "h100", 3, zones=[EA, EB])), pool("p", "h100", 4, zones=[EA, EB])),
                        (fleet(GKE, pool("p", "h100", 3, zones=[GA, GB, GC]), eng=gang(workers=2)),
                         pool("p", "h100", 9, zones=[GA, GB, GC]))]:
        assert of(plan(docs), "m").unplaced[0].feasibility.verdict == FITS_AFTER_SCALE_UP  # type: ignore[union-attr]
        docs[2] = cluster("c", grown, source=docs[2]["spec"]["cluster"])
        assert len(of(plan(docs), "m").replicas) == 1


# ---------------------------------------------------------------- kept gangs


def test_kept_gangs_keep_their_zones() -> None:
    """A re-plan from its own placement keeps every gang copy in the zone it was given, although
    a fresh plan would give the lone one the first zone."""
    docs = fleet(GKE, pool("p", "h100", 4, zones=[GA, GB]), replicas=2)
    first = plan(docs)
    assert [r.engines["main"].zones for r in of(first, "m").replicas] == [(GA,), (GB,)]
    docs[3] = deployment("m", 1, gang())          # scale down: one of the two leaves
    again = of(plan(docs, previous=first), "m")
    assert len(again.replicas) == 1
    kept = again.replicas[0]
    before = {r.name: r.engines["main"].zones for r in of(first, "m").replicas}
    assert kept.engines["main"].zones == before[kept.name]


def test_a_kept_gang_in_the_second_zone_stays_there() -> None:
    docs = fleet(GKE, pool("p", "h100", 4, zones=[GA, GB]), replicas=2)
    first = plan(docs)
    in_b = next(r for r in of(first, "m").replicas if r.engines["main"].zones == (GB,))
    prev = first.to_json()
    dep = prev["deployments"][0]
    dep["replicas"] = [r for r in dep["replicas"] if r["name"] == in_b.name]
    from modelplane.scheduler import FleetPlacement
    again = of(plan(docs, previous=FleetPlacement.from_json(prev)), "m")
    zones = {r.name: r.engines["main"].zones for r in again.replicas}
    assert zones[in_b.name] == (GB,) and sorted(zones.values()) == [(GA,), (GB,)]


def test_kept_gangs_a_zone_cannot_hold_are_dropped_and_placed_again() -> None:
    """A previous placement put both copies in one zone that holds one: the zone is overdrawn,
    the later replica is not kept, and fill places it in the other zone."""
    from modelplane.scheduler import FleetPlacement

    docs = fleet(GKE, pool("p", "h100", 4, zones=[GA, GB]), replicas=2)
    prev = plan(docs).to_json()
    for r in prev["deployments"][0]["replicas"]:
        r["engines"]["main"]["zones"] = [GA]
    again = of(plan(docs, previous=FleetPlacement.from_json(prev)), "m")
    assert sorted(r.engines["main"].zones for r in again.replicas) == [(GA,), (GB,)]
    over = next(c for c in again.conditions if c.type == "Overdrawn")
    assert f"p zone {GA}" in over.message, over.message


def test_a_kept_gang_recorded_without_zones_gets_the_zone_the_others_leave() -> None:
    """A placement written before zones were recorded: the kept gang takes the best fit among
    what the recorded one leaves."""
    from modelplane.scheduler import FleetPlacement

    docs = fleet(GKE, pool("p", "h100", 4, zones=[GA, GB]), replicas=2)
    prev = plan(docs).to_json()
    first, second = prev["deployments"][0]["replicas"]
    first["engines"]["main"]["zones"] = [GB]
    del second["engines"]["main"]["zones"]
    again = of(plan(docs, previous=FleetPlacement.from_json(prev)), "m")
    zones = {r.name: r.engines["main"].zones for r in again.replicas}
    assert zones == {first["name"]: (GB,), second["name"]: (GA,)}


def test_zones_are_absent_from_the_json_of_engines_without_any() -> None:
    placed = plan(fleet(GKE, pool("p", "h100", 2, zones=[GA])))
    engine_json = placed.to_json()["deployments"][0]["replicas"][0]["engines"]["main"]
    assert "zones" not in engine_json


# ---------------------------------------------------------------- the hooks alone


def test_the_plugin_binds_only_gangs_in_fleets_with_zoned_pools() -> None:
    zoned = cycle_of(fleet(GKE, pool("p", "h100", 4, zones=[GA, GB])))
    assert binding(zoned, GangZones) is not None
    one_zone = cycle_of(fleet(GKE, pool("p", "h100", 4, zones=[GA])))
    assert binding(one_zone, GangZones) is None
    standalone = cycle_of([gpu_class("h100", 8), cluster("c", pool("p", "h100", 2, zones=[GA, GB]), source=GKE),
                           deployment("m", 1)])
    assert binding(standalone, GangZones) is None


def test_reserve_charges_the_zone_and_refusal_is_remembered() -> None:
    cycle = ledger_ready(cycle_of(fleet(GKE, pool("p", "h100", 2, zones=[GA, GB]))))
    fit, zones = binding(cycle, DeviceFit), binding(cycle, GangZones)
    c = cycle.clusters["c"]
    r = Reservation(c, Trial(cycle.ledger))
    assert fit.reserve(r) is None
    why = zones.reserve(r)
    assert why is not None and why.code == codes.ZONE_SHORTFALL
    assert zones.refuses_already(c)
    assert zones.explain(c) == why


def test_reserve_records_the_zone_it_charged() -> None:
    cycle = ledger_ready(cycle_of(fleet(GKE, pool("p", "h100", 4, zones=[GA, GB]))))
    fit, zones = binding(cycle, DeviceFit), binding(cycle, GangZones)
    c = cycle.clusters["c"]
    r = Reservation(c, Trial(cycle.ledger))
    assert fit.reserve(r) is None and zones.reserve(r) is None
    assert r.engines is not None and r.engines["main"].zones == (GA,)
    assert r.ledger.state(("c", "p", GA)).free == 0 and r.ledger.state(("c", "p", GB)).free == 2  # type: ignore[union-attr]
    assert not zones.refuses_already(c)


def test_keep_charges_the_recorded_zone() -> None:
    docs = fleet(GKE, pool("p", "h100", 4, zones=[GA, GB]))
    placed = of(plan(docs), "m").replicas[0]
    from dataclasses import replace as dc_replace
    in_b = dc_replace(placed, engines={"main": dc_replace(placed.engines["main"], zones=(GB,))})
    cycle = cycle_of(docs)
    fit, zones = binding(cycle, DeviceFit), binding(cycle, GangZones)
    kept = Keeping(in_b, cycle.clusters["c"], 0)
    assert fit.keep(kept) is None and zones.keep(kept) is None
    assert kept.engines is not None and kept.engines["main"].zones == (GB,)
    zoned = [part for part, _ in kept.charges if not isinstance(part, str)]
    assert zoned and set(zoned) == {("p", GB)}
