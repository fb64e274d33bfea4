"""Why a cluster refused a replica, or why a kept replica was not kept: `Reason(code, plugin,
message)`.

The message is what people read (`plan`, `pulumi preview`, the placement JSON); the code
is what programs read: feasibility tells capacity from policy by it, never by the text.
A `Reason` *is* its message (a `str`), so the JSON keeps `{"cluster": "message"}` byte for
byte and anything that prints or compares reasons keeps working; two reasons with one
message are one explanation. A reason read back from a placement document carries only
its message: its code is `RECORDED`.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache


class Reason(str):
    """A refusal: `code` (one of the constants below), `plugin` (the plugin or stage that
    refused) and the message, which is the string itself."""

    code: str
    plugin: str

    def __new__(cls, code: str, plugin: str, message: str) -> Reason:
        self = super().__new__(cls, message)
        self.code = code
        self.plugin = plugin
        return self

    @property
    def message(self) -> str:
        return str.__str__(self)

    def __reduce__(self) -> tuple[type[Reason], tuple[str, str, str]]:
        return (Reason, (self.code, self.plugin, self.message))

    def __repr__(self) -> str:
        return f"Reason({self.code!r}, {self.plugin!r}, {self.message!r})"


@lru_cache(maxsize=4096)
def recorded(message: str) -> Reason:
    """A reason as a placement document holds it: the message alone. One object per
    message (a document repeats a few messages thousands of times)."""
    return Reason(RECORDED, "", message)


# -- refusals of a cluster (per-cluster plugins) ------------------------------------
SELECTOR_MISMATCH = "ClusterSelectorMismatch"     # selectors: the deployment's clusterSelector
CACHE_SELECTOR_MISMATCH = "CacheSelectorMismatch"  # cache-staging: the ModelCache's clusterSelector
CACHE_NOT_STAGEABLE = "CacheNotStageable"         # cache-staging: no cache storage on the cluster
CLUSTER_UNAVAILABLE = "ClusterUnavailable"        # outages: unreachable, unready, failover in flight
UNTOLERATED_TAINT = "UntoleratedTaint"            # taints: NoSchedule/NoExecute keeps new replicas off
NOT_IN_ANY_TIER = "NotInAnyTier"                  # tiers: outside every clusterPreferences tier
SPREAD_CONSTRAINT = "SpreadConstraint"            # spread: a spreadConstraint refuses the cluster's group
NO_POOL_FITS = "NoPoolFits"                       # device-fit: no pool matches the engine at any size
INSUFFICIENT_CAPACITY = "InsufficientCapacity"    # device-fit: pools match, but are short
ZONE_SHORTFALL = "ZoneShortfall"                  # gang-zones: the pool has room, no one zone of it has
NO_COMMON_ZONE = "NoCommonZone"                   # gang-zones: a gang's pools share no zone, at any size
BUDGET_EXCEEDED = "BudgetExceeded"                # budgets: a FleetBudget cannot pay for the replica
REJECTED = "Rejected"                             # no plugin said why (never expected)

# -- why a previous replica is not kept (stages) ---------------------------------------
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
