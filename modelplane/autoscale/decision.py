"""How many replicas a deployment should run, from its metrics: HPA's algorithm, pure.

`decide(autoscaler, current, readings, history, now)` follows the Kubernetes
HorizontalPodAutoscaler controller step by step (kubernetes/kubernetes
pkg/controller/podautoscaler/horizontal.go `reconcileAutoscaler`,
`computeReplicasForMetrics`, `normalizeDesiredReplicasWithBehaviors`,
`stabilizeRecommendationWithBehaviors`, `convertDesiredReplicasWithBehaviorRate`,
`calculateScale{Up,Down}Limit...`; replica_calculator.go `calcPlainMetricReplicas`,
`getUsageRatioReplicaCount`; and the "Algorithm details" of kubernetes.io's
Horizontal Pod Autoscaling page):

1. `current` is 0 with `minReplicas` > 0: the deployment is parked, nothing scales
   (HPA's implicit maintenance mode). `current` above max or below min: straight to the
   bound.
2. Per metric: ratio = average per ready replica / target; within the tolerance
   (0.1 by default) the proposal is `current`, else ceil(ratio x replicas that reported).
   Replicas that did not report are assumed at the target on a scale-down and at 0 on a
   scale-up; replicas not ready count as 0 on a scale-up; if that flips the direction or
   lands in the tolerance, the proposal is `current`.
3. The largest proposal wins. No metric readable: no change. Some unreadable, or some
   ready replicas that did not report one, and the rest say scale down: no change (missing
   metrics never scale down; HPA only dampens a scale-down by its missing pods).
4. Stabilization: the result is kept between the lowest recommendation of the scale-up
   window and the highest of the scale-down window (defaults 0 s and 300 s).
5. Step policies (Pods / Percent per periodSeconds, selectPolicy Max | Min | Disabled)
   against the changes made within each period, then min / max.

Where ours differs from HPA, and why, is listed in docs/autoscaling.md: per replica, not
per pod; not-ready replicas are set aside for every metric (HPA does it for CPU only);
exact arithmetic in micro-units (HPA's float64 product can add a replica); and waking
from zero (HPA scales 0 -> n only on Object/External metrics): the deployment's waiting
requests give ceil(waiting / target), the scale-up window is skipped (as SkyServe skips
its upscale delay from zero) and a step policy never holds it at 0.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction

from modelplane.api.replica_autoscaler import (
    DEFAULT_POLICY_PERIOD_SECONDS,
    DEFAULT_SCALE_DOWN_WINDOW_SECONDS,
    DEFAULT_TOLERANCE,
    METRIC_UNITS,
    WAKING_METRICS,
    ReplicaAutoscaler,
    ScalingRules,
)
from modelplane.json_types import JsonObject
from modelplane.scheduler import Condition

from . import conditions as c
from .history import History, Recommendation, ScaleEvent, kept
from .readings import MetricReading, Reading, Unreadable

# A reading older than this is stale: unreadable, so it never scales down.
DEFAULT_MAX_METRIC_AGE_S = 120.0
# Values are compared in micro-units (HPA uses milli-units): finer, so a KV cache fraction
# or a sub-millisecond latency still registers, and exact, so 0.9 / 0.3 is 3.
_MICRO = 1_000_000


@dataclass(frozen=True)
class Policy:
    type: str        # Pods | Percent
    value: int
    period_seconds: int


@dataclass(frozen=True)
class Rules:
    """One direction's HPAScalingRules with HPA's defaults filled in (defaults.go)."""

    window_seconds: int
    select: str                          # Max | Min | Disabled
    policies: tuple[Policy, ...]
    tolerance: float = DEFAULT_TOLERANCE

    @property
    def longest_period(self) -> int:
        return max((p.period_seconds for p in self.policies), default=0)


# HPA's defaults: scale up by 4 pods or 100% per 15 s, whichever is more, no window;
# scale down by up to 100% per 15 s after a 300 s window.
SCALE_UP_DEFAULT = Rules(0, "Max", (Policy("Pods", 4, DEFAULT_POLICY_PERIOD_SECONDS),
                                    Policy("Percent", 100, DEFAULT_POLICY_PERIOD_SECONDS)))
SCALE_DOWN_DEFAULT = Rules(DEFAULT_SCALE_DOWN_WINDOW_SECONDS, "Max",
                           (Policy("Percent", 100, DEFAULT_POLICY_PERIOD_SECONDS),))


def resolve(given: ScalingRules | None, default: Rules) -> Rules:
    """HPA's copyHPAScalingRules: every field the autoscaler sets replaces the default's."""
    if given is None:
        return default
    policies = (tuple(Policy(p.type, p.value, p.period_seconds) for p in given.policies)
                if given.policies is not None else default.policies)
    return Rules(
        given.stabilization_window_seconds if given.stabilization_window_seconds is not None
        else default.window_seconds,
        given.select_policy or default.select, policies,
        given.tolerance if given.tolerance is not None else default.tolerance)


def behavior_of(autoscaler: ReplicaAutoscaler) -> tuple[Rules, Rules]:
    behavior = autoscaler.spec.behavior
    return (resolve(behavior.scale_up if behavior else None, SCALE_UP_DEFAULT),
            resolve(behavior.scale_down if behavior else None, SCALE_DOWN_DEFAULT))


@dataclass(frozen=True)
class MetricStatus:
    """One metric in one decision: its average per ready replica and what it proposed,
    or why it could not be read."""

    type: str
    target: float
    average: float | None = None
    proposal: int | None = None
    error: str | None = None
    missing: int = 0            # ready replicas that did not report it (they hold a scale-down)
    note: str | None = None     # why the first of them did not

    def to_json(self) -> JsonObject:
        out: JsonObject = {"type": self.type, "target": self.target}
        if self.error is not None:
            out["error"] = self.error
        else:
            out["average"] = self.average
            out["proposal"] = self.proposal
        return out


@dataclass(frozen=True)
class Decision:
    current: int
    desired: int
    recommendation: int | None      # the metrics' proposal before stabilization and limits
    reason: str                     # why `desired` is what it is (a condition reason)
    message: str
    metrics: tuple[MetricStatus, ...] = ()
    conditions: tuple[Condition, ...] = ()
    history: History = field(default_factory=History)

    def condition(self, type_: str) -> Condition | None:
        return next((x for x in self.conditions if x.type == type_), None)

    def to_json(self) -> JsonObject:
        return {"current": self.current, "desired": self.desired, "recommendation": self.recommendation,
                "reason": self.reason, "message": self.message, "metrics": [m.to_json() for m in self.metrics],
                "conditions": [x.to_json() for x in self.conditions], "history": self.history.to_json()}


def decide(autoscaler: ReplicaAutoscaler, current: int, readings: Mapping[str, Reading], history: History,
           now: float, max_age: float = DEFAULT_MAX_METRIC_AGE_S) -> Decision:
    """The replicas `autoscaler`'s target should run now. `current` is the count it runs
    (the last decision); `readings` come from a MetricsSource; `history` is the previous
    decision's `history` (History() for a first decision). Pure: same inputs, same result."""
    spec = autoscaler.spec
    low, high = spec.min_replicas, spec.max_replicas
    up, down = behavior_of(autoscaler)
    history = history.clamped(now)
    if current == 0 and low > 0:
        why = (f"replicas is 0 and minReplicas is {low}: the deployment is parked; set spec.replicas "
               "to 1 or more, or minReplicas: 0, to let the autoscaler run it")
        return Decision(0, 0, None, c.SCALING_DISABLED, why,
                        conditions=(c.condition(c.SCALING_ACTIVE, status=False, reason=c.SCALING_DISABLED,
                                                message=why),), history=history)
    if current > high or current < low:
        bound, reason = (high, c.TOO_MANY_REPLICAS) if current > high else (low, c.TOO_FEW_REPLICAS)
        why = (f"{current} replicas is {'above maxReplicas' if current > high else 'below minReplicas'} "
               f"{bound}: straight to {bound}")
        return Decision(current, bound, None, reason, why,
                        conditions=(c.condition(c.SCALING_LIMITED, status=True, reason=reason, message=why),),
                        history=_record_event(history, current, bound, now, up, down))
    statuses = [_propose(m.type, m.target.average_value, readings.get(m.type), current, up, down, now, max_age)
                for m in spec.metrics]
    valid = [s for s in statuses if s.proposal is not None]
    invalid = [s for s in statuses if s.error is not None]
    if not valid:
        why = "; ".join(f"{s.type}: {s.error}" for s in invalid) or "no metric could be read"
        return _hold(current, c.FAILED_GET_METRICS, f"no metric could be read, no change ({why})", statuses,
                     history)
    proposal, best = max(((s.proposal, s) for s in valid if s.proposal is not None), key=lambda p: p[0])
    gaps = [s for s in valid if s.missing]
    if (invalid or gaps) and proposal < current:
        why = "; ".join([*(f"{s.type}: {s.error}" for s in invalid),
                         *(f"{s.type}: {s.missing} ready replica(s) did not report it"
                           + (f" ({s.note})" if s.note else "") for s in gaps)])
        return _hold(current, c.SCALE_DOWN_SKIPPED,
                     f"the readable metrics say {proposal} but some are unreadable ({why}): a missing metric "
                     "never scales down", statuses, history)
    stabilized, recommendations = _stabilize(history, current, proposal, now, up, down)
    desired, limit_reason, limit_message = _limit(current, stabilized, history, now, low, high, up, down)
    stable = c.READY_FOR_NEW_SCALE
    if stabilized != proposal:
        stable = c.SCALE_UP_STABILIZED if proposal >= current else c.SCALE_DOWN_STABILIZED
    new_history = _record_event(History(recommendations, history.scale_up, history.scale_down), current, desired,
                                now, up, down)
    # HPA sets AbleToScale from the stabilization, then, when it rescales, SucceededRescale.
    able, able_message = ((c.SUCCEEDED_RESCALE, f"the autoscaler set the replica count to {desired}")
                          if desired != current else (stable, _ABLE_MESSAGES[stable]))
    conds = (
        c.condition(c.ABLE_TO_SCALE, status=True, reason=able, message=able_message),
        c.condition(c.SCALING_ACTIVE, status=True, reason=c.VALID_METRIC_FOUND,
                    message=f"the replica count is computed from {best.type}"),
        c.condition(c.SCALING_LIMITED, status=limit_reason != c.DESIRED_WITHIN_RANGE, reason=limit_reason,
                    message=limit_message),
    )
    if limit_reason != c.DESIRED_WITHIN_RANGE:
        reason = limit_reason
    elif stable != c.READY_FOR_NEW_SCALE:
        reason = stable
    else:
        reason = c.SCALED_UP if desired > current else c.SCALED_DOWN if desired < current else c.NO_CHANGE
    return Decision(current, desired, proposal, reason, _summary(current, desired, proposal, best, statuses),
                    tuple(statuses), conds, new_history)


_ABLE_MESSAGES = {
    c.READY_FOR_NEW_SCALE: "recommended size matches current size",
    c.SCALE_UP_STABILIZED: "recent recommendations were lower than current one, applying the lowest recent "
                           "recommendation",
    c.SCALE_DOWN_STABILIZED: "recent recommendations were higher than current one, applying the highest recent "
                             "recommendation",
}


def _hold(current: int, reason: str, message: str, statuses: list[MetricStatus], history: History) -> Decision:
    # HPA returns before normalizing: no recommendation is recorded, nothing scales.
    return Decision(current, current, None, reason, message, tuple(statuses),
                    (c.condition(c.SCALING_ACTIVE, status=False, reason=reason, message=message),), history)


def _micro(value: float) -> int:
    return round(value * _MICRO)


def _ceil(value: Fraction) -> int:
    return math.ceil(value)


def _within(ratio: Fraction, up: Rules, down: Rules) -> bool:
    """HPA's tolerance band (per direction since KEP-4951): no change for small ratios."""
    if ratio > 1:
        return ratio - 1 <= _exact(up.tolerance)
    return 1 - ratio <= _exact(down.tolerance)


def _exact(tolerance: float) -> Fraction:
    # 0.1 as a float is 0.1000000000000000055...; the tolerance a user wrote is 1/10.
    return Fraction(tolerance).limit_denominator(_MICRO)


def _propose(type_: str, target: float, reading: Reading | None, current: int, up: Rules, down: Rules,
             now: float, max_age: float) -> MetricStatus:
    """HPA's calcPlainMetricReplicas for one metric (getUsageRatioReplicaCount at zero)."""
    if current == 0 and type_ not in WAKING_METRICS:
        return MetricStatus(type_, target, error="no value while no replica runs")
    if reading is None:
        return MetricStatus(type_, target, error="not reported by the metrics source")
    if isinstance(reading, Unreadable):
        return MetricStatus(type_, target, error=reading.reason)
    if reading.observed_at is not None and abs(now - reading.observed_at) > max_age:
        age = now - reading.observed_at
        when = f"{age:.0f} s ago" if age > 0 else f"{-age:.0f} s in the future"
        return MetricStatus(type_, target, error=f"stale: read {when}, more than {max_age:g} s from now")
    goal = max(_micro(target), 1)
    total = _micro(reading.total)
    if current == 0:
        return MetricStatus(type_, target, reading.total, _ceil(Fraction(total, goal)))
    if reading.reporting == 0:
        return MetricStatus(type_, target, error="no ready replica reported it")
    average = reading.average
    return MetricStatus(type_, target, average, _replicas(reading, total, goal, current, up, down),
                        missing=reading.missing, note=reading.note)


def _replicas(reading: MetricReading, total: int, goal: int, current: int, up: Rules, down: Rules) -> int:
    ratio = Fraction(total, reading.reporting * goal)
    rebalance_unready = reading.unready > 0 and ratio > 1
    if not rebalance_unready and reading.missing == 0:
        return current if _within(ratio, up, down) else _ceil(Fraction(total, goal))
    # Missing replicas at the target on a scale-down, at 0 on a scale-up; not-ready ones
    # at 0 on a scale-up: both dampen the change and never reverse it.
    count, adjusted = reading.reporting, total
    if reading.missing and ratio != 1:
        count += reading.missing
        adjusted += reading.missing * goal if ratio < 1 else 0
    if rebalance_unready:
        count += reading.unready
    new_ratio = Fraction(adjusted, count * goal)
    if _within(new_ratio, up, down) or (ratio < 1 < new_ratio) or (ratio > 1 > new_ratio):
        return current
    proposal = _ceil(Fraction(adjusted, goal))
    if (new_ratio < 1 and proposal > current) or (new_ratio > 1 and proposal < current):
        return current
    return proposal


def _stabilize(history: History, current: int, proposal: int, now: float, up: Rules,
               down: Rules) -> tuple[int, tuple[Recommendation, ...]]:
    """HPA's stabilizeRecommendationWithBehaviors: keep the count between the lowest
    recommendation of the scale-up window and the highest of the scale-down window, then
    record this one. Waking from zero skips the scale-up window (ours, as SkyServe)."""
    up_cut, down_cut = now - up.window_seconds, now - down.window_seconds
    lowest = highest = proposal
    for rec in history.recommendations:
        if rec.at > up_cut and current > 0:
            lowest = min(lowest, rec.replicas)
        if rec.at > down_cut:
            highest = max(highest, rec.replicas)
    stabilized = min(max(current, lowest), highest)
    # Recommendations older than both windows can never count again.
    return stabilized, kept((*history.recommendations, Recommendation(now, proposal)), min(up_cut, down_cut))


def _period_start(current: int, history: History, period: int, now: float) -> int:
    """The count when the period began: current - added + removed since (HPA's periodStartReplicas)."""
    cutoff = now - period
    added = sum(e.change for e in history.scale_up if e.at > cutoff)
    removed = sum(e.change for e in history.scale_down if e.at > cutoff)
    return current - added + removed


def _up_limit(current: int, history: History, now: float, rules: Rules) -> int:
    if rules.select == "Disabled":
        return current
    proposals = []
    for p in rules.policies:
        start = _period_start(current, history, p.period_seconds, now)
        proposals.append(start + p.value if p.type == "Pods" else math.ceil(start * (1 + p.value / 100)))
    limit = min(proposals) if rules.select == "Min" else max(proposals)
    # Waking from zero: a Percent policy of 0 replicas allows 0; ours lets 1 through.
    return max(limit, 1) if current == 0 else limit


def _down_limit(current: int, history: History, now: float, rules: Rules) -> int:
    if rules.select == "Disabled":
        return current
    proposals = []
    for p in rules.policies:
        start = _period_start(current, history, p.period_seconds, now)
        proposals.append(start - p.value if p.type == "Pods" else int(start * (1 - p.value / 100)))
    return max(proposals) if rules.select == "Min" else min(proposals)


def _limit(current: int, desired: int, history: History, now: float, low: int, high: int, up: Rules,
           down: Rules) -> tuple[int, str, str]:
    """HPA's convertDesiredReplicasWithBehaviorRate: the step policies, then min and max."""
    if desired > current:
        limit = max(_up_limit(current, history, now, up), current)
        if high > limit:
            allowed, reason = limit, c.SCALE_UP_LIMIT
            message = "the desired replica count is increasing faster than the maximum scale rate"
        else:
            allowed, reason = high, c.TOO_MANY_REPLICAS
            message = "the desired replica count is more than the maximum replica count"
        if desired > allowed:
            return allowed, reason, message
    elif desired < current:
        limit = min(_down_limit(current, history, now, down), current)
        if low < limit:
            allowed, reason = limit, c.SCALE_DOWN_LIMIT
            message = "the desired replica count is decreasing faster than the maximum scale rate"
        else:
            allowed, reason = low, c.TOO_FEW_REPLICAS
            message = "the desired replica count is less than the minimum replica count"
        if desired < allowed:
            return allowed, reason, message
    return desired, c.DESIRED_WITHIN_RANGE, "the desired count is within the acceptable range"


def _record_event(history: History, current: int, desired: int, now: float, up: Rules, down: Rules) -> History:
    """HPA's storeScaleEvent: a change is remembered as long as any policy may count it
    (each direction's limit counts the other direction's changes too), then dropped."""
    since = now - max(up.longest_period, down.longest_period)
    ups, downs = history.scale_up, history.scale_down
    if desired > current:
        ups = (*ups, ScaleEvent(now, desired - current))
    elif desired < current:
        downs = (*downs, ScaleEvent(now, current - desired))
    return History(history.recommendations, kept(ups, since), kept(downs, since))


def _summary(current: int, desired: int, proposal: int, best: MetricStatus, statuses: list[MetricStatus]) -> str:
    shown = []
    per = "per replica" if current else "for the deployment, no replica running"
    for s in statuses:
        if s.error is not None:
            shown.append(f"{s.type} unreadable ({s.error})")
        else:
            shown.append(f"{s.type} {s.average:g} {per} (target {s.target:g}) -> {s.proposal}")
    head = f"{current} -> {desired} replicas" if desired != current else f"{current} replicas, no change"
    if proposal != desired:
        head += f" (the metrics ask for {proposal})"
    return f"{head}; largest: {best.type} ({METRIC_UNITS[best.type]}); " + "; ".join(shown)


__all__ = [
    "DEFAULT_MAX_METRIC_AGE_S", "SCALE_DOWN_DEFAULT", "SCALE_UP_DEFAULT", "Decision", "MetricStatus", "Policy",
    "Rules", "behavior_of", "decide", "resolve",
]
