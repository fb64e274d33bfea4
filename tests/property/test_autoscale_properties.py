"""Properties of the autoscaler (hypothesis), under any metric sequence:

* the count stays within [minReplicas, maxReplicas] (from a count already in range);
* it does not flap more than the behavior allows: within the scale-down window after a
  recommendation r, the count never falls below min(current, r) (and within a scale-up
  window never rises above max(current, r)); over any policy period the count moves at
  most the policy's step from where it stood at the period's start;
* placed by the scheduler, it never exceeds a FleetBudget, never places more than the
  decision asked for, and reports ScalingLimited exactly when it placed fewer.

The behavior semantics are HPA's (kubernetes pkg/controller/podautoscaler/horizontal.go
`stabilizeRecommendationWithBehaviors`, `calculateScale{Up,Down}Limit...`); the decision
module cites them case by case (tests/unit/autoscale/test_decision.py).
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from modelplane.api import load_manifest_text
from modelplane.api.replica_autoscaler import ReplicaAutoscaler
from modelplane.autoscale import FileMetricsSource, History, MetricReading, Unreadable, decide
from modelplane.autoscale import conditions as c
from modelplane.autoscale.scaled_placement import decide_fleet, place_decisions
from tests.manifests import cluster, deployment, fleet_budget, gpu_class, metric, pool, replica_autoscaler, to_yaml

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
START = 1_000_000.0


@st.composite
def behaviors(draw) -> dict:
    def direction() -> dict:
        out: dict = {"stabilizationWindowSeconds": draw(st.sampled_from([0, 0, 30, 120, 300]))}
        kind = draw(st.sampled_from(["Pods", "Percent"]))
        out["policies"] = [{"type": kind, "value": draw(st.integers(1, 5) if kind == "Pods" else st.integers(10, 200)),
                            "periodSeconds": draw(st.sampled_from([15, 60, 120]))}]
        return out
    return {"scaleUp": direction(), "scaleDown": direction()}


@st.composite
def autoscalers(draw) -> ReplicaAutoscaler:
    low = draw(st.integers(0, 3))
    high = draw(st.integers(max(low, 1), 12))
    metrics = [metric("QueueDepth", draw(st.sampled_from([1, 2, 4])))]
    if draw(st.booleans()):
        metrics.append(metric("KVCacheUtilization", draw(st.sampled_from([0.5, 0.8]))))
    doc = replica_autoscaler("a", "m", high, *metrics, min_replicas=low,
                             behavior=draw(behaviors()) if draw(st.booleans()) else None)
    return ReplicaAutoscaler.model_validate(doc)


def reading(data, type_: str, current: int, now: float):
    """A random reading for `current` replicas: unreadable, stale, or some load with some
    replicas missing or not ready."""
    if data.draw(st.integers(0, 9)) == 0:
        return Unreadable("gone")
    top = 1.0 if type_ == "KVCacheUtilization" else 40.0
    average = data.draw(st.floats(0, top, allow_nan=False))
    if current == 0:
        return MetricReading(average, 0, observed_at=now)
    missing = data.draw(st.integers(0, current))
    unready = data.draw(st.integers(0, current - missing))
    reporting = current - missing - unready
    age = data.draw(st.sampled_from([0, 0, 0, 30, 500]))
    return MetricReading(average * reporting, reporting, missing, unready, observed_at=now - age)


def run_sequence(data, scaler: ReplicaAutoscaler, steps: int):
    spec = scaler.spec
    current = data.draw(st.integers(spec.min_replicas, spec.max_replicas), label="start")
    now, h = START, History()
    trace = []   # (time, current, desired, recommendation)
    for _ in range(steps):
        now += data.draw(st.sampled_from([1, 5, 15, 15, 30, 61, 200, 301]))
        readings = {m.type: reading(data, m.type, current, now) for m in spec.metrics}
        d = decide(scaler, current, readings, h, now)
        trace.append((now, current, d.desired, d.recommendation))
        h, current = d.history, d.desired
    return trace


@SETTINGS
@given(st.data(), autoscalers())
def test_the_count_stays_within_min_and_max(data, scaler) -> None:
    for _, _, desired, _ in run_sequence(data, scaler, 25):
        assert scaler.spec.min_replicas <= desired <= scaler.spec.max_replicas


@SETTINGS
@given(st.data(), autoscalers())
def test_no_flapping_beyond_the_stabilization_windows(data, scaler) -> None:
    from modelplane.autoscale.decision import behavior_of

    up, down = behavior_of(scaler)
    trace = run_sequence(data, scaler, 25)
    for i, (t_i, _, _, rec) in enumerate(trace):
        if rec is None:
            continue
        for t_j, current_j, desired_j, _ in trace[i + 1:]:
            if t_j - t_i < down.window_seconds:
                assert desired_j >= min(current_j, rec), (t_i, rec, t_j, current_j, desired_j)
            if t_j - t_i < up.window_seconds and current_j > 0:
                assert desired_j <= max(current_j, rec), (t_i, rec, t_j, current_j, desired_j)


@SETTINGS
@given(st.data(), autoscalers())
def test_steps_stay_within_the_policies(data, scaler) -> None:
    from modelplane.autoscale.decision import behavior_of

    up, down = behavior_of(scaler)
    trace = run_sequence(data, scaler, 25)
    start_count = trace[0][1]

    def count_at(t: float) -> int:
        """The count after every decision made at or before t."""
        count = start_count
        for t_k, _, desired_k, _ in trace:
            if t_k <= t:
                count = desired_k
        return count

    for t_j, current_j, desired_j, _ in trace:
        if up.select != "Disabled" and len(up.policies) == 1 and current_j > 0:
            p = up.policies[0]
            base = count_at(t_j - p.period_seconds)
            allowed = base + p.value if p.type == "Pods" else -(-base * (100 + p.value) // 100)
            assert desired_j <= max(current_j, allowed), (t_j, current_j, desired_j, base)
        if down.select != "Disabled" and len(down.policies) == 1:
            p = down.policies[0]
            base = count_at(t_j - p.period_seconds)
            allowed = base - p.value if p.type == "Pods" else base * (100 - min(p.value, 100)) // 100
            assert desired_j >= min(current_j, allowed), (t_j, current_j, desired_j, base)


@st.composite
def budget_fleets(draw) -> tuple[list[dict], dict]:
    """One-GPU nodes and one-GPU replicas, so a budget of B devices is B replicas."""
    docs: list[dict] = [gpu_class("g1", 1)]
    for i in range(draw(st.integers(1, 3))):
        docs.append(cluster(f"c{i}", pool("gpu", "g1", draw(st.integers(0, 4)))))
    values = {}
    for name in ("chat", "embed"):
        replicas = draw(st.integers(0, 4))
        docs.append(deployment(name, replicas, namespace="ml"))
        docs.append(replica_autoscaler(name, name, draw(st.integers(1, 10)), min_replicas=draw(st.integers(0, 1)),
                                       namespace="ml"))
        if draw(st.booleans()):
            values[("ml", name)] = {"QueueDepth": draw(st.floats(0, 40, allow_nan=False))}
    docs.append(fleet_budget("ml", draw(st.integers(0, 6)), namespaces=["ml"]))
    return docs, values


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(budget_fleets())
def test_placed_decisions_never_exceed_a_budget_and_report_every_shortfall(case) -> None:
    docs, values = case
    try:
        fleet = load_manifest_text(to_yaml(docs))
    except ValueError:
        return   # minReplicas above a drawn maxReplicas is a load error, tested elsewhere
    decisions = decide_fleet(fleet, FileMetricsSource(values), START)
    placement, outcomes = place_decisions(fleet, decisions)
    (budget,) = fleet.budgets.values()
    placed = sum(len(placement.find("ml", name).replicas) for name in ("chat", "embed"))
    assert placed <= budget.spec.max_devices
    for o in outcomes:
        dp = placement.find(*o.target)
        assert dp.desired == o.decision.desired
        assert o.placed == len(dp.replicas) <= o.decision.desired
        limited = o.limited.status == c.TRUE and o.limited.reason == c.PLACEMENT_LIMITED
        assert limited == (o.placed < o.decision.desired)
        if limited:
            assert [u["index"] for u in o.unplaced] == list(range(o.placed, o.decision.desired))
