"""Why a cluster refused a replica, or why a kept replica was not kept: `Reason(code, plugin,
message, kind)`, a frozen value.

The message is what people read (`plan`, `pulumi preview`, the placement JSON); the code
and the kind are what programs read, never the text. The kind is set by the plugin that
refuses, as a Kubernetes filter plugin sets its status (Unschedulable, answered by
preemption, against UnschedulableAndUnresolvable): feasibility gives a replica its verdict by
the kinds of the refusals alone, so a new plugin's refusal is judged as its plugin says:

* `POLICY` (the default) — a rule refuses the cluster: no scale-up answers it (`Blocked`);
* `CAPACITY` — the cluster could take it with more nodes, or once a FleetBudget has room:
  feasibility simulates the scale-up, and charges the budgets (`FitsAfterScaleUp`, or
  `Blocked` naming the FleetBudget);
* `NEVER` — the cluster cannot hold it at any size (`NotFeasible` when no cluster can).

A reason is turned into text only at the edges that print or write it (`message`): the JSON
keeps `{"cluster": "message"}` byte for byte. A reason read back from a placement document
carries its message only: its code is `RECORDED`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

Kind = Literal["policy", "capacity", "never"]
POLICY: Kind = "policy"          # a rule refuses: no scale-up answers it
CAPACITY: Kind = "capacity"      # more nodes (or budget) could answer it: feasibility simulates
NEVER: Kind = "never"            # no size of the cluster could hold it


@dataclass(frozen=True, slots=True)
class Reason:
    """A refusal: `code` (one of the constants below), `plugin` (the plugin or stage that
    refused), the `message` people read and its `kind` (what could answer it)."""

    code: str
    plugin: str
    message: str
    kind: Kind = POLICY


def messages(reasons: Mapping[str, Reason]) -> dict[str, str]:
    """The words of each cluster's reason: what the JSON holds."""
    return {cluster: why.message for cluster, why in reasons.items()}


@lru_cache(maxsize=4096)
def recorded(message: str) -> Reason:
    """A reason as a placement document holds it: the message alone. One object per
    message (a document repeats a few messages thousands of times)."""
    return Reason(RECORDED, "", message)


# -- refusals of a cluster (per-cluster plugins), with the kind each plugin gives -----
SELECTOR_MISMATCH = "ClusterSelectorMismatch"     # selectors (never): the deployment's clusterSelector
CACHE_SELECTOR_MISMATCH = "CacheSelectorMismatch"  # cache-staging (never): the ModelCache's clusterSelector
CACHE_NOT_STAGEABLE = "CacheNotStageable"         # cache-staging (never): no cache storage on the cluster
CLUSTER_UNAVAILABLE = "ClusterUnavailable"        # outages (policy): unreachable, unready, failover in flight
UNTOLERATED_TAINT = "UntoleratedTaint"            # taints (policy): NoSchedule/NoExecute keeps new replicas off
NOT_IN_ANY_TIER = "NotInAnyTier"                  # tiers (policy): outside every clusterPreferences tier
SPREAD_CONSTRAINT = "SpreadConstraint"            # spread (policy): a spreadConstraint refuses the cluster's group
NO_POOL_FITS = "NoPoolFits"                       # device-fit (never): no pool matches the engine at any size
INSUFFICIENT_CAPACITY = "InsufficientCapacity"    # device-fit (capacity): pools match, but are short
ZONE_SHORTFALL = "ZoneShortfall"                  # gang-zones (capacity): the pool has room, no one zone of it
NO_COMMON_ZONE = "NoCommonZone"                   # gang-zones (never): a gang's pools share no zone
BUDGET_EXCEEDED = "BudgetExceeded"                # budgets (capacity): a FleetBudget cannot pay for the replica
REJECTED = "Rejected"                             # no plugin said why (never expected)

# -- why a previous replica is not kept (stages; no verdict reads their kind) -----------
CLUSTER_GONE = "ClusterGone"
DUPLICATE = "DuplicateIdentity"
EVICTED = "EvictedByTaint"
PINS_CHANGED = "PinsNoLongerMatch"
SCALED_DOWN = "ScaledDown"
OVERDRAWN = "PoolOverdrawn"
OVER_BUDGET = "OverBudget"
FAILED_OVER = "FailedOver"
MOVED_BACK = "MovedBack"
MOVE_CANCELLED = "MoveCancelled"

RECORDED = "Recorded"                             # read back from a placement document


class Deferred:
    """A refusal whose words are only worked out if someone reads them: device fit knows a
    cluster refuses a demand (it refused it earlier in the pass) long before anyone asks
    why, and most refusals are never printed."""

    __slots__ = ("_explain", "_reason")

    def __init__(self, explain: Callable[[], Reason]) -> None:
        self._explain = explain
        self._reason: Reason | None = None

    def resolve(self) -> Reason:
        if self._reason is None:
            self._reason = self._explain()
        return self._reason


Refusal = Reason | Deferred


def resolve(refusal: Refusal) -> Reason:
    return refusal.resolve() if isinstance(refusal, Deferred) else refusal
