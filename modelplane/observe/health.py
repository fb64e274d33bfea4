"""Cluster health across runs: when an unreachable or unready cluster stops taking replicas,
and when its replicas are re-placed elsewhere.

Pure, with time as an input: `assess(previous, readings, verification, placement, now)` gives
each unhealthy cluster a `ClusterHealth(condition, since, reason)`; `since` is the time of the
first check that saw it unhealthy and is carried over unchanged while it stays so (state holds
it: the placement resource's `health` output), so a cluster that stays healthy, or stays down,
writes the same value run after run. `outages(health, now, settings)` is the scheduler's input:
every unhealthy cluster takes no new replica; once it has been so for its grace period, its
replicas are re-placed (scheduler.failover).

* Unreachable: its API server did not answer within the read bound.
* Unready: it answers, the previous placement has replicas there and none of them is ready.
A healthy check clears the record: the next failure starts a new grace period.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace

from modelplane.durations import MAX_GRACE_S, seconds
from modelplane.json_types import JsonMapping, JsonObject, JsonValue
from modelplane.redact import outside_text
from modelplane.scheduler import FleetPlacement, Outage

from .read import MAX_REASON, NotRead, Reading, Unreachable
from .verify import Verification

UNREACHABLE = "Unreachable"
UNREADY = "Unready"
DEFAULT_UNREACHABLE_GRACE_S = 300      # Kubernetes' own pod eviction delay for an unreachable node
DEFAULT_UNREADY_GRACE_S = 900          # room for a model to load before "unready" means "broken"
# A health record's `since` is epoch seconds from 1970 up to the last second datetime can print
# (9999-12-31T23:59:59Z); anything else in a state file or --previous is not a time.
MAX_EPOCH_S = 253402300799
HEALTH_SHAPE = '{"cluster": {"condition": "Unreachable"|"Unready", "since": epoch seconds, "reason": text}}'


@dataclass(frozen=True)
class FailoverSettings:
    """Seconds a cluster may stay unreachable / unready before its replicas are re-placed."""

    unreachable_grace: float = DEFAULT_UNREACHABLE_GRACE_S
    unready_grace: float = DEFAULT_UNREADY_GRACE_S

    def __post_init__(self) -> None:
        seconds(self.unreachable_grace, "unreachableGraceSeconds", maximum=MAX_GRACE_S, allow_zero=True)
        seconds(self.unready_grace, "unreadyGraceSeconds", maximum=MAX_GRACE_S, allow_zero=True)

    def grace(self, condition: str) -> float:
        return self.unreachable_grace if condition == UNREACHABLE else self.unready_grace

    def to_json(self) -> dict[str, float]:
        return {"unreachableGraceSeconds": self.unreachable_grace, "unreadyGraceSeconds": self.unready_grace}

    @classmethod
    def from_json(cls, data: JsonMapping | None) -> FailoverSettings:
        """From the `observe` block; DurationError (a ValueError) unless each grace period is a
        finite number of seconds from 0 to MAX_GRACE_S (NaN would mean "never evacuated")."""
        data = data or {}
        return cls(*(seconds(data.get(key, default), key, maximum=MAX_GRACE_S, allow_zero=True)
                     for key, default in (("unreachableGraceSeconds", DEFAULT_UNREACHABLE_GRACE_S),
                                          ("unreadyGraceSeconds", DEFAULT_UNREADY_GRACE_S))))


@dataclass(frozen=True)
class ClusterHealth:
    condition: str                 # Unreachable | Unready
    since: int                     # epoch seconds of the first check that saw it
    reason: str

    def to_json(self) -> JsonObject:
        return {"condition": self.condition, "since": self.since, "reason": self.reason}

    @classmethod
    def from_json(cls, data: JsonValue, where: str = "") -> ClusterHealth:
        """A record read back (a state, --previous): outside text, checked; ValueError naming
        `where` otherwise. The reason is stored as modelplane.redact passes it."""
        at = f"{where}: " if where else ""
        if not isinstance(data, dict):
            raise ValueError(f"{at}expected an object like {HEALTH_SHAPE}")
        condition, since, reason = data.get("condition"), data.get("since"), data.get("reason", "")
        if condition not in (UNREACHABLE, UNREADY):
            raise ValueError(f"{at}condition must be Unreachable or Unready")
        if (isinstance(since, bool) or not isinstance(since, (int, float)) or not math.isfinite(since)
                or not 0 <= since <= MAX_EPOCH_S):
            raise ValueError(f"{at}since must be epoch seconds from 0 to {MAX_EPOCH_S} (a time a clock gives)")
        if not isinstance(reason, str):
            raise ValueError(f"{at}reason must be text")
        return cls(str(condition), int(since), outside_text(reason, limit=MAX_REASON))


Health = dict[str, ClusterHealth]


def health_from_json(data: JsonValue) -> Health:
    """Health records as `to_json` writes them; ValueError naming the cluster and the field."""
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ValueError(f"expected an object of clusters like {HEALTH_SHAPE}, not {type(data).__name__}")
    return {str(k): ClusterHealth.from_json(v, f"cluster {outside_text(k, limit=60)!r}") for k, v in data.items()}


def health_to_json(health: Mapping[str, ClusterHealth]) -> JsonObject:
    return {k: v.to_json() for k, v in sorted(health.items())}


def assess(previous: Mapping[str, ClusterHealth], readings: Mapping[str, Reading], verification: Verification,
           placement: FleetPlacement | None, now: float) -> Health:
    """The health of every cluster that was read; clusters not asked keep no record, those whose
    kubeconfig was unusable keep the one they had."""
    placed: dict[str, int] = {}
    ready: dict[str, int] = {}
    for dep in placement.deployments if placement is not None else []:
        for rep in dep.replicas:
            placed[rep.cluster] = placed.get(rep.cluster, 0) + 1
    for check in verification.replicas:
        if check.ready:
            ready[check.cluster] = ready.get(check.cluster, 0) + 1
    out: Health = {}
    for name, reading in sorted(readings.items()):
        if isinstance(reading, NotRead):
            if name in previous:
                out[name] = previous[name]              # nothing learned: the record stands
            continue
        if isinstance(reading, Unreachable):
            condition, reason = UNREACHABLE, outside_text(reading.reason, limit=MAX_REASON)
        elif placed.get(name) and not ready.get(name):
            condition, reason = UNREADY, f"none of its {placed[name]} replica(s) is ready"
        else:
            continue
        before = previous.get(name)
        if before is not None and before.since > now:
            before = replace(before, since=int(now))        # a record from the future would never expire
        if before is not None and before.condition == condition:
            out[name] = before                          # unchanged: the same record, the same state
        elif before is not None:
            out[name] = ClusterHealth(condition, before.since, reason)   # unhealthy all along
        else:
            out[name] = ClusterHealth(condition, int(now), reason)
    return out


def outages(health: Mapping[str, ClusterHealth], now: float, settings: FailoverSettings) -> dict[str, Outage]:
    out = {}
    for name, h in sorted(health.items()):
        grace = settings.grace(h.condition)
        evacuate = now - h.since >= grace
        when = "grace period over: its replicas are re-placed" if evacuate else \
            f"its replicas are re-placed after {grace:g}s"
        out[name] = Outage(f"{h.condition.lower()} since {h.since} ({h.reason}); {when}", evacuate,
                           reachable=h.condition != UNREACHABLE)
    return out
