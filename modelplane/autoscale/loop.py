"""One pass of the autoscaling loop: read, decide, place; what leaves drains first.

    cycle = scale_fleet(fleet, state, source, now, previous, place, drained)

The same pass runs in the placement resource's check() (every `pulumi preview` / `up`, so
`reconcile` runs the loop: read, decide, place, up, verify) and in the local demo's loop:

1. **decide**, for every ReplicaAutoscaler: `current` is its last decision (the state's
   `replicas`; on first sight the previous placement's count, else `spec.replicas`; a
   deployment whose manifest says `replicas: 0` under a `minReplicas` of 1 or more is parked
   and stays at 0); the history starts as HPA's does (`History.seeded`: the current count is
   the first recommendation, so the first scale-down waits a whole window);
2. **place**: `place(fleet at the decided counts, previous placement)` is the scheduler's
   (place_fleet, or the observer's place_observed). On a scale-up, replicas still draining
   are put back first (they are warm and hold their devices): at most as many as the
   decision adds;
3. **drain**: every replica of an autoscaled deployment that the previous placement had and
   this one does not (a scale-in) is kept in the state as `draining` from now on: out of every
   route (modelplane.gateway.fleet.leaving_routes), its objects still applied, until
   `drained(replica)` says it is done (the Pulumi stacks: `drainSeconds` after it left;
   locally: once its engine is idle, at most a grace period). Only then is it deleted.

Pure given `source` and `place`.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from modelplane.api import Fleet
from modelplane.api.replica_autoscaler import ReplicaAutoscaler
from modelplane.json_types import JsonObject
from modelplane.redact import outside_text
from modelplane.scheduler import FleetPlacement

from . import conditions as c
from .decision import Decision, decide
from .history import History
from .readings import MetricsSource, Reading, Unreadable
from .scaled_placement import ScalingOutcome, outcomes, scaled_fleet
from .state import AutoscalerState, Draining, Held, ScaleRecord, ScalingState

# A decision with one of these reasons acted on no metric: the state says so (AutoscalerState.held).
HELD_REASONS = frozenset({c.FAILED_GET_METRICS, c.SCALE_DOWN_SKIPPED})

Key = tuple[str, str]
PlacementJson = JsonObject
# Seconds a replica stays out of the routes before its objects are deleted, in the Pulumi
# stacks: a ConfigMap change reaches a running Traefik when the kubelet syncs the volume
# (its sync period, one minute by default, plus the cache's), and what was in flight then
# finishes. docs/autoscaling.md, "Scale-in that loses nothing".
DEFAULT_DRAIN_SECONDS = 120.0
MAX_DRAIN_SECONDS = 3600.0
# Set by `python -m modelplane reconcile --metrics FILE` for every pulumi run: the metrics file
# the placement reads (components/autoscale.py), in place of stack config autoscale.metricsFile.
METRICS_FILE_ENV = "MODELPLANE_AUTOSCALE_METRICS"


@dataclass(frozen=True)
class Cycle:
    """What one pass decided: the placement (JSON, as the scheduler wrote it), each
    autoscaler's outcome, the state to keep, and the replicas that finished draining in
    this pass (their objects go now)."""

    placement: PlacementJson
    outcomes: tuple[ScalingOutcome, ...]
    state: ScalingState
    drained: tuple[Draining, ...] = ()

    def typed(self) -> FleetPlacement:
        return FleetPlacement.from_json(self.placement)


def current_of(fleet: Fleet, scaler: ReplicaAutoscaler, state: ScalingState,
               previous: FleetPlacement | None) -> int:
    """What the autoscaler's target runs now (step 1 above)."""
    key = scaler.target_key
    declared = fleet.deployments[key].spec.replicas
    if declared == 0 and scaler.spec.min_replicas > 0:
        return 0
    kept = state.autoscalers.get(key)
    if kept is not None:
        return kept.replicas
    before = previous.find(*key) if previous is not None else None
    return before.desired if before is not None else declared


def decide_all(fleet: Fleet, source: MetricsSource, state: ScalingState, previous: FleetPlacement | None,
               now: float) -> dict[Key, Decision]:
    """A decision for every autoscaled deployment, each from its own history (seeded on first sight)."""
    out: dict[Key, Decision] = {}
    for scaler in sorted(fleet.autoscalers.values(), key=lambda a: a.target_key):
        key = scaler.target_key
        current = current_of(fleet, scaler, state, previous)
        kept = state.autoscalers.get(key)
        history = kept.history if kept is not None else History.seeded(current, now)
        out[key] = decide(scaler, current, _read(source, scaler, current, now), history, now)
    return out


def _read(source: MetricsSource, scaler: ReplicaAutoscaler, current: int, now: float) -> Mapping[str, Reading]:
    """The source's readings for one autoscaler; a reading it could not build (a value out of
    bounds) makes that autoscaler's metrics unreadable, with the reason, and no other's."""
    try:
        return source.read(scaler, current, now)
    except ValueError as exc:
        why = outside_text(exc, limit=300)
        return {m.type: Unreadable(f"the metrics source gave no usable reading ({why})") for m in scaler.spec.metrics}


def _revive(previous: PlacementJson | None, draining: tuple[Draining, ...],
            decisions: Mapping[Key, Decision]) -> tuple[PlacementJson | None, set[tuple[str, str]]]:
    """The previous placement with, for each scale-up, up to as many of its draining replicas
    as it adds (the most recent first): the scheduler keeps them as it keeps any replica."""
    if previous is None or not draining:
        return previous, set()
    doc = copy.deepcopy(previous)
    revived: set[tuple[str, str]] = set()
    for dep in doc.get("deployments") or []:
        key = (dep.get("namespace"), dep.get("name"))
        decision = decisions.get(key)
        if decision is None or decision.desired <= decision.current:
            continue
        names = {r.get("name") for r in dep.get("replicas") or []}
        candidates = sorted((d for d in draining if (d.namespace, d.deployment) == key and d.replica.name not in names),
                            key=lambda d: -d.since)[:decision.desired - decision.current]
        for d in candidates:
            dep.setdefault("replicas", []).append(d.replica.to_json())
            revived.add(d.key)
    return doc, revived


def _names(placement: PlacementJson | None) -> dict[Key, JsonObject]:
    """(namespace, deployment) -> {replica name: replica JSON}."""
    out: dict[Key, JsonObject] = {}
    for dep in (placement or {}).get("deployments") or []:
        out[(dep.get("namespace"), dep.get("name"))] = {r.get("name"): r for r in dep.get("replicas") or []}
    return out


def scale_fleet(fleet: Fleet, state: ScalingState, source: MetricsSource, now: float,
                previous: PlacementJson | None,
                place: Callable[[Fleet, PlacementJson | None], PlacementJson],
                drained: Callable[[Draining], bool]) -> Cycle:
    """One pass (the module's docstring). `previous`: the last placement document (or None);
    `place(fleet, previous)` returns the new placement document; `drained(d)`: whether a
    replica out of the routes since `d.since` may be deleted now. Times `state` holds from after
    `now` count as `now` (ScalingState.clamped)."""
    state = state.clamped(now)
    before = FleetPlacement.from_json(previous) if previous else None
    decisions = decide_all(fleet, source, state, before, now)
    revived_previous, revived = _revive(previous, state.draining, decisions)
    placement = place(scaled_fleet(fleet, {k: d.desired for k, d in decisions.items()}), revived_previous)
    typed = FleetPlacement.from_json(placement)
    now_placed = _names(placement)
    old_placed = _names(previous)
    still: list[Draining] = []
    done: list[Draining] = []
    for d in state.draining:
        if d.key in revived or d.replica.name in now_placed.get((d.namespace, d.deployment), {}):
            continue                                    # serving again: the same objects, routed
        (done if drained(d) else still).append(d)
    leaving = {d.key for d in still}
    for key, decision in decisions.items():
        if decision.desired >= decision.current:
            continue
        kept = now_placed.get(key, {})
        for name, raw in old_placed.get(key, {}).items():
            if name in kept or (key[0], name) in leaving:
                continue
            replica = FleetPlacement.from_json({"deployments": [{"namespace": key[0], "name": key[1], "desired": 1,
                                                                 "replicas": [raw]}]}).deployments[0].replicas[0]
            still.append(Draining(key[0], key[1], replica, now))
    scalers = {}
    for key, decision in decisions.items():
        old = state.autoscalers.get(key)
        last = old.last_scale if old is not None else None
        if decision.desired != decision.current:
            last = ScaleRecord(now, decision.current, decision.desired, decision.reason, decision.message)
        held = Held(decision.reason, decision.message) if decision.reason in HELD_REASONS else None
        scalers[key] = AutoscalerState(decision.desired, decision.history, last, held)
    return Cycle(placement, tuple(outcomes(fleet, decisions, typed)), ScalingState(scalers, tuple(still)),
                 tuple(done))


__all__ = ["DEFAULT_DRAIN_SECONDS", "MAX_DRAIN_SECONDS", "METRICS_FILE_ENV", "Cycle", "current_of", "decide_all",
           "scale_fleet"]
