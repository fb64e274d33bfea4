"""Decisions placed by the fleet scheduler, through its public API only.

The autoscaler decides how many replicas; where they go is the scheduler's: the fleet is
copied with each autoscaled deployment's `spec.replicas` replaced by its decision and
given to `modelplane.scheduler.place_fleet` as it is (budgets, spread, tiers, capacity,
feasibility all apply unchanged). A decision the scheduler cannot fully place is never
dropped silently: its `ScalingLimited` condition turns True with reason
`PlacementLimited`, the scheduler's reason per cluster for the first unplaced replica and
every unplaced replica's feasibility verdict.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

from modelplane.api import Fleet
from modelplane.api.replica_autoscaler import ReplicaAutoscaler
from modelplane.json_types import JsonObject
from modelplane.scheduler import (
    DEFAULT_ACCOUNTING,
    Condition,
    DeploymentPlacement,
    FleetPlacement,
    ObservedCapacity,
    Unplaced,
    place_fleet,
)
from modelplane.scheduler.refusals import refusal_lines

from . import conditions as c
from .decision import Decision, decide
from .history import History
from .readings import MetricsSource

Key = tuple[str, str]
# At most this many unplaced replicas are spelled out in one ScalingLimited message.
MESSAGE_REPLICAS = 3


def current_replicas(fleet: Fleet, key: Key, previous: FleetPlacement | None) -> int:
    """What the deployment runs now: the previous placement's count if it has one (the
    last decision), else the manifest's `spec.replicas`."""
    before = previous.find(*key) if previous is not None else None
    return before.desired if before is not None else fleet.deployments[key].spec.replicas


def decide_fleet(fleet: Fleet, source: MetricsSource, now: float, previous: FleetPlacement | None = None,
                 histories: Mapping[Key, History] | None = None) -> dict[Key, Decision]:
    """A decision for every autoscaled deployment, keyed by the deployment."""
    histories = histories or {}
    out: dict[Key, Decision] = {}
    for scaler in fleet.autoscalers.values():
        key = scaler.target_key
        current = current_replicas(fleet, key, previous)
        out[key] = decide(scaler, current, source.read(scaler, current, now), histories.get(key, History()), now)
    return out


def scaled_fleet(fleet: Fleet, counts: Mapping[Key, int]) -> Fleet:
    """A copy of `fleet` whose deployments in `counts` ask for that many replicas; `fleet`
    itself is not changed."""
    deployments = dict(fleet.deployments)
    for key, replicas in counts.items():
        dep = deployments[key]
        deployments[key] = dep.model_copy(update={"spec": dep.spec.model_copy(update={"replicas": replicas})})
    return dataclasses.replace(fleet, deployments=deployments)


@dataclass(frozen=True)
class ScalingOutcome:
    """One autoscaler after placement: its decision, what the scheduler placed of it, and
    the ScalingLimited condition that says whether it got what it asked for."""

    autoscaler: ReplicaAutoscaler
    decision: Decision
    placed: int
    limited: Condition
    unplaced: tuple[JsonObject, ...] = ()   # {index, verdict, message} per unplaced replica

    @property
    def target(self) -> Key:
        return self.autoscaler.target_key

    def conditions(self) -> list[Condition]:
        """The decision's conditions, its ScalingLimited replaced by the placed one."""
        kept = [x for x in self.decision.conditions if x.type != c.SCALING_LIMITED]
        return [*kept, self.limited]

    def to_json(self) -> JsonObject:
        """What `plan --json` reports. The decision's history is state, not a report (the
        placement resource keeps it): leaving it out keeps the output a function of the
        inputs, with no clock in it."""
        decision = {k: v for k, v in self.decision.to_json().items() if k != "history"}
        out = {"namespace": self.autoscaler.metadata.namespace or "default", "name": self.autoscaler.name,
               "target": self.target[1], **decision, "placed": self.placed,
               "conditions": [x.to_json() for x in self.conditions()]}
        if self.unplaced:
            out["unplaced"] = list(self.unplaced)
        return out


def place_decisions(fleet: Fleet, decisions: Mapping[Key, Decision], previous: FleetPlacement | None = None,
                    accounting: str = DEFAULT_ACCOUNTING,
                    observed: ObservedCapacity | None = None) -> tuple[FleetPlacement, list[ScalingOutcome]]:
    """The placement of `fleet` at the decided counts, and one outcome per autoscaler."""
    placement = place_fleet(scaled_fleet(fleet, {k: d.desired for k, d in decisions.items()}),
                            previous=previous, accounting=accounting, observed=observed)
    return placement, outcomes(fleet, decisions, placement)


def outcomes(fleet: Fleet, decisions: Mapping[Key, Decision], placement: FleetPlacement) -> list[ScalingOutcome]:
    """One outcome per autoscaler: its decision against what `placement` placed of it."""
    out = []
    for scaler in sorted(fleet.autoscalers.values(), key=lambda a: a.target_key):
        decision = decisions.get(scaler.target_key)
        placed = placement.find(*scaler.target_key)
        if decision is None or placed is None:
            continue
        out.append(_outcome(scaler, decision, placed))
    return out


def _outcome(scaler: ReplicaAutoscaler, decision: Decision, placed: DeploymentPlacement) -> ScalingOutcome:
    short = len(placed.unplaced)
    count = placed.desired - short
    if not short:
        own = decision.condition(c.SCALING_LIMITED) or c.condition(
            c.SCALING_LIMITED, status=False, reason=c.DESIRED_WITHIN_RANGE,
            message="the desired count is within the acceptable range")
        return ScalingOutcome(scaler, decision, count, own)
    unplaced = tuple(_unplaced_json(u) for u in placed.unplaced)
    asked = f"{decision.desired} replica(s) asked for"
    if decision.desired > decision.current:
        asked += f" (scaled up from {decision.current})"
    first = placed.unplaced[0]
    reasons = "; ".join(refusal_lines(first.refusals)) or "no cluster"
    verdicts = "; ".join(f"replica #{u['index']}: {u['verdict']}: {u['message']}"
                         for u in unplaced[:MESSAGE_REPLICAS] if u.get("verdict"))
    more = f" (and {short - MESSAGE_REPLICAS} more)" if short > MESSAGE_REPLICAS else ""
    message = (f"the scheduler placed {count} of the {asked}: replica #{first.index} refused by {reasons}"
               + (f"; {verdicts}{more}" if verdicts else more))
    capped = decision.condition(c.SCALING_LIMITED)
    if capped is not None and capped.status == c.TRUE:
        message += f"; the autoscaler was already limited: {capped.reason}: {capped.message}"
    limited = c.condition(c.SCALING_LIMITED, status=True, reason=c.PLACEMENT_LIMITED, message=message)
    return ScalingOutcome(scaler, decision, count, limited, unplaced)


def _unplaced_json(unplaced: Unplaced) -> JsonObject:
    feasibility = unplaced.feasibility
    out: JsonObject = {"index": unplaced.index}
    if feasibility is not None:
        out["verdict"] = feasibility.verdict
        out["message"] = feasibility.message
    return out


__all__ = ["ScalingOutcome", "current_replicas", "decide_fleet", "outcomes", "place_decisions", "scaled_fleet"]
