"""Placing against the clusters as they are: the one path the placement provider's check()
and `plan --observe` share, so preview and the CLI agree on the same objects.

    plan = place_observed(fleet, previous_json, readings, now=time.time())

1. verify the previous placement on the clusters read: its replicas there get `"ready": false`
   exactly when they are not Running and Ready where planned (moves and failovers finish only
   onto ready replicas);
2. observed capacity of every cluster read (declared sizes elsewhere, with why);
3. cluster health carried from the previous run (`since` stays put while a condition lasts);
4. `place_fleet` with the observed pools and the outages; the placement returned carries the
   same `"ready": false` marks, so the state the provider writes says which replicas were not ready.
Pure given `readings` and `now`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from modelplane.api import Fleet
from modelplane.json_types import JsonMapping, JsonObject
from modelplane.scheduler import DEFAULT_ACCOUNTING, FleetPlacement, ObservedPool, place_fleet

from . import CAPACITY_KEY as CAPACITY_KEY
from . import HEALTH_KEY as HEALTH_KEY
from .capacity import FleetCapacity, fleet_capacity
from .health import FailoverSettings, Health, assess, outages
from .read import NotRead, Reading
from .verify import Verification, verify


@dataclass(frozen=True)
class ObservedPlan:
    placement: JsonObject                 # placement JSON, with "ready": false marks
    capacity: FleetCapacity
    health: Health
    verification: Verification = field(default_factory=Verification)   # of the previous placement

    def typed(self) -> FleetPlacement:
        return FleetPlacement.from_json(self.placement)


def mark_not_ready(placement: JsonMapping, report: Verification, clusters: Iterable[str]) -> JsonObject:
    """A placement document whose replicas on `clusters` (those just read) carry
    `"ready": false` exactly when the verification found them not ready (the scheduler then
    finishes no move and no failover onto them); replicas elsewhere keep what they had."""
    read = set(clusters)
    bad = {(r.namespace, r.deployment, r.replica) for r in report.not_ready()}
    deployments = []
    for dep in placement.get("deployments") or []:
        replicas = []
        for rep in dep.get("replicas") or []:
            if rep.get("cluster") in read:
                rep = {k: v for k, v in rep.items() if k != "ready"}
                if (dep.get("namespace"), dep.get("name"), rep.get("name")) in bad:
                    rep["ready"] = False
            replicas.append(rep)
        deployments.append({**dep, "replicas": replicas})
    return {**placement, "deployments": deployments}


def place_observed(fleet: Fleet, previous: JsonMapping | None, readings: Mapping[str, Reading], *,
                   now: float, accounting: str = DEFAULT_ACCOUNTING,
                   counts: Mapping[str, Mapping[str, int]] | None = None,
                   health: Health | None = None, settings: FailoverSettings | None = None) -> ObservedPlan:
    """`previous`: the last placement document (`plan --json`, the provider's state) or None;
    `counts`: declared node counts by hand (`--observed`), used where a pool was not read.
    Raises PlacementFormatError on a malformed previous document."""
    before = FleetPlacement.from_json(previous) if previous else None
    report = verify(fleet, before, readings) if before is not None else Verification()
    asked = [c for c, r in readings.items() if not isinstance(r, NotRead)]
    marked = mark_not_ready(previous, report, asked) if previous else None
    capacity = fleet_capacity(fleet, readings, before)
    observed: dict[str, dict[str, int | ObservedPool]] = {c: dict(p) for c, p in (counts or {}).items()}
    for cluster, pools in capacity.observed().items():
        observed.setdefault(cluster, {}).update(pools)
    now_health = assess(health or {}, readings, report, before, now)
    placement = place_fleet(fleet, FleetPlacement.from_json(marked) if marked else None, accounting,
                            observed or None, outages=outages(now_health, now, settings or FailoverSettings()))
    out = mark_not_ready(placement.to_json(), report, asked)
    return ObservedPlan(out, capacity, now_health, report)
