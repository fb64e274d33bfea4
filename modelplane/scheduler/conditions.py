"""Every condition the scheduler writes, in one place: its type, status, reason and words.

A deployment's conditions come in `ORDER`; the stages and plugins that know the facts
call the builders below, so a condition is worded once whoever reports it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from modelplane.json_types import JsonObject
from modelplane.words import counted


@dataclass(frozen=True)
class Condition:
    type: str
    status: str
    reason: str
    message: str

    def to_json(self) -> JsonObject:
        return {"type": self.type, "status": self.status, "reason": self.reason,
                "message": self.message}


REPLICAS_SCHEDULED = "ReplicasScheduled"
OVERDRAWN = "Overdrawn"
FAILED_OVER = "FailedOver"
SPREAD_SATISFIED = "SpreadSatisfied"
PREFERENCES_HONORED = "PreferencesHonored"
WITHIN_BUDGET = "WithinBudget"

# The order a deployment's conditions are listed in (a type not listed comes last).
ORDER = (REPLICAS_SCHEDULED, OVERDRAWN, FAILED_OVER, SPREAD_SATISFIED, PREFERENCES_HONORED, WITHIN_BUDGET)


def in_order(conditions: Sequence[Condition]) -> list[Condition]:
    rank = {t: i for i, t in enumerate(ORDER)}
    return sorted(conditions, key=lambda c: rank.get(c.type, len(ORDER)))


def replicas_scheduled(desired: int, placed: int, candidates: int, invalid: str | None = None) -> Condition:
    if invalid:
        return Condition(REPLICAS_SCHEDULED, "False", "InvalidNodeSelector", invalid)
    if desired == 0:
        return Condition(REPLICAS_SCHEDULED, "True", "ScaledToZero", "replicas is 0: deployment parked")
    if candidates == 0:
        return Condition(REPLICAS_SCHEDULED, "False", "NoClusters",
                         "No InferenceCluster matches the cluster selectors")
    if placed >= desired:
        return Condition(REPLICAS_SCHEDULED, "True", "ReplicasCreated", f"Scheduled {placed} of {desired} replicas")
    if placed > 0:
        # Diverges from the reference on purpose: a partial shortfall is not "True".
        return Condition(REPLICAS_SCHEDULED, "False", "PartialCapacity", f"Scheduled {placed} of {desired} replicas")
    return Condition(REPLICAS_SCHEDULED, "False", "InsufficientCapacity",
                     f"0 of {desired} replicas scheduled (checked {counted(candidates, 'cluster')})")


def overdrawn(dropped: Sequence[str]) -> Condition:
    """The previous placement kept more replicas on a pool than it holds; those listed
    were not kept (docs/scheduler.md, "Overdrawn pools")."""
    return Condition(OVERDRAWN, "True", "PreviousPlacementOvercommitted",
                     f"{len(dropped)} kept replica(s) did not fit their pool and were not kept: "
                     + "; ".join(dropped))


def failed_over(entries: Sequence[tuple[str, str, str, str | None]]) -> Condition:
    """(replica, its cluster, why the cluster failed, its replacement or None) per replica set aside."""
    parts = []
    for name, cluster, why, to in entries:
        then = (f"replaced by {to}, removed once that is ready and {cluster} answers" if to
                else "no replacement fits anywhere: kept")
        parts.append(f"{name} on {cluster} ({why}): {then}")
    return Condition(FAILED_OVER, "True", "ClusterUnavailable", "; ".join(parts))


def spread_satisfied(desired: int, problems: Sequence[tuple[str, str]], summary: str) -> Condition:
    """`problems`: (reason, message) per rule not met, in rule order."""
    if desired == 0:
        return Condition(SPREAD_SATISFIED, "True", "ScaledToZero", "replicas is 0: nothing to spread")
    if problems:
        return Condition(SPREAD_SATISFIED, "False", problems[0][0], "; ".join(m for _, m in problems))
    return Condition(SPREAD_SATISFIED, "True", "Satisfied", summary)


@dataclass(frozen=True)
class TierFacts:
    """What PreferencesHonored says of one deployment."""

    desired: int
    placed: int                  # replicas placed or kept (serving)
    first_tier: str
    outside_first: Sequence[str]  # replicas outside the most preferred tier
    moving: Sequence[str]        # "old (tier) -> new (tier)" per move in flight
    max_moves: int
    streak: int
    return_after: int
    blocked: str | None          # why no replica could move back now


def preferences_honored(f: TierFacts) -> Condition:
    if f.moving:
        return Condition(PREFERENCES_HONORED, "False", "Moving",
                         f"moving back, new replica first: {', '.join(f.moving)}")
    if f.desired == 0:
        return Condition(PREFERENCES_HONORED, "True", "ScaledToZero", "replicas is 0: no replica to place")
    if f.placed == 0:
        # Not "True: every replica is in tier ...": there is none to be anywhere.
        return Condition(PREFERENCES_HONORED, "False", "NoReplicasPlaced",
                         f"0 of {f.desired} replicas placed, in no tier (ReplicasScheduled says why)")
    if not f.outside_first:
        return Condition(PREFERENCES_HONORED, "True", "Preferred", f"every replica is in tier {f.first_tier}")
    where = f"{len(f.outside_first)} replica(s) outside tier {f.first_tier} ({', '.join(f.outside_first)})"
    if f.max_moves == 0:
        return Condition(PREFERENCES_HONORED, "True", "Overflow", f"{where}; maxMovesPerPlan is 0: they stay")
    if f.streak > 0:
        return Condition(PREFERENCES_HONORED, "False", "ReturnPending",
                         f"{where}; a more preferred tier has had room for {f.streak} of "
                         f"{f.return_after} consecutive plans")
    why = f": {f.blocked}" if f.blocked else ""
    return Condition(PREFERENCES_HONORED, "True", "Overflow", f"{where}; no room in a more preferred tier{why}")


def within_budgets(refusals: Sequence[str], usage: Sequence[tuple[str, int, int]]) -> Condition:
    """A deployment's budgets: why replicas were refused (first per budget), or
    (budget, used, max) of each budget in its scope."""
    if refusals:
        return Condition(WITHIN_BUDGET, "False", "BudgetExceeded", "; ".join(refusals))
    parts = [f"FleetBudget {name}: {used} of {most} devices used" for name, used, most in usage]
    return Condition(WITHIN_BUDGET, "True", "WithinBudget", "; ".join(parts))


def budget_status(refused: int, used: int, most: int) -> Condition:
    """One FleetBudget after the plan."""
    if refused:
        return Condition(WITHIN_BUDGET, "False", "BudgetExceeded",
                         f"{refused} replica(s) not placed or dropped: {used} of {most} devices used")
    return Condition(WITHIN_BUDGET, "True", "WithinBudget", f"{used} of {most} devices used")
