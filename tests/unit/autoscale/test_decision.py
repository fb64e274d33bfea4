"""The decision, case by case against HPA's documented behaviour.

Sources read for these cases (with `search` / `read_file`):
* kubernetes.io "Horizontal Pod Autoscaling" (kubernetes/website
  content/en/docs/concepts/workloads/autoscaling/horizontal-pod-autoscale.md): "Algorithm
  details" (the ratio, the 0.1 tolerance, missing metrics assumed at 100% of the target on
  a scale-down and 0% on a scale-up, not-yet-ready pods at 0% on a scale-up, "If the new
  ratio reverses the scale direction, or is within the tolerance, the controller doesn't
  take any scaling action", the largest proposal over metrics, and "If any of these metrics
  cannot be converted into a desired replica count ... and a scale down is suggested by the
  metrics which can be fetched, scaling is skipped"), "Scaling policies", "Stabilization
  window", "Tolerance" and "Default behavior" (scale-down window 300 s, Percent 100 per 15 s;
  scale-up no window, max of 4 pods or 100% per 15 s), "Implicit maintenance-mode
  deactivation" (target at 0 with minReplicas > 0: the HPA stops adjusting).
* kubernetes/kubernetes pkg/controller/podautoscaler/replica_calculator.go
  (`calcPlainMetricReplicas`, `getUsageRatioReplicaCount`: at currentReplicas 0 the count is
  ceil(usageRatio), "to support scaling to zero pods") and horizontal.go
  (`reconcileAutoscaler`: current above max / below min goes straight to the bound;
  `stabilizeRecommendationWithBehaviors`: between the lowest recommendation of the
  scale-up window and the highest of the scale-down window; `convertDesiredReplicasWithBehaviorRate`
  with `calculateScaleUpLimitWithScalingRules` / `calculateScaleDownLimitWithBehaviors`:
  period start = current - added + removed within the period; reasons ScaleUpLimit,
  TooManyReplicas, ScaleDownLimit, TooFewReplicas, DesiredWithinRange).
* kubernetes/kubernetes horizontal_test.go `TestScalingWithRules` and `TestNormalizeDesiredReplicas`:
  the rate-limit and stabilization cases below carry those tests' names and numbers.
* SkyPilot docs/source/serving/autoscaling.rst: "When upscaling from zero, the upscale delay
  will be ignored in order to bring up the service faster" (ours does the same from zero).
"""

from __future__ import annotations

import pytest

from modelplane.autoscale import History, HistoryFormatError, MetricReading, Unreadable, decide
from modelplane.autoscale import conditions as c
from modelplane.autoscale.history import MAX_ENTRIES
from tests.manifests import metric

from .helpers import NOW, each, history, queue, rules, scaler

# --- the ratio and the tolerance (first decisions: no history) ---------------------------

RATIO_CASES = [
    # name, current, QueueDepth reading, behavior, desired, reason
    ("scale up: 3 replicas at twice the target double", 3, each(8, 3), None, 6, c.SCALED_UP),
    ("scale down at once on a first decision (no history to stabilize on)", 4, each(1, 4), None, 1, c.SCALED_DOWN),
    ("tolerance: exactly 10% above the target holds", 3, each(4.4, 3), None, 3, c.NO_CHANGE),
    ("tolerance: past 10% above the target scales", 3, each(4.41, 3), None, 4, c.SCALED_UP),
    ("tolerance: exactly 10% below the target holds", 10, each(3.6, 10), None, 10, c.NO_CHANGE),
    ("tolerance: past 10% below the target scales", 10, each(3.59, 10), None, 9, c.SCALED_DOWN),
    ("configurable tolerance (KEP-4951): scaleUp tolerance 0 acts on 1% above", 3, each(4.04, 3),
     {"scaleUp": {"tolerance": 0}}, 4, c.SCALED_UP),
    ("configurable tolerance: a wide scaleDown tolerance holds at half the target", 4, each(2, 4),
     {"scaleDown": {"tolerance": 0.5}}, 4, c.NO_CHANGE),
    ("missing replicas hold a scale-down (HPA's TestReplicaCalcMissingMetrics dampens it to 3: ours holds, an "
     "unreadable replica may be the busiest)", 4, each(1, 2, missing=2), None, 4, c.SCALE_DOWN_SKIPPED),
    ("missing replicas at 0 dampen a scale-up into the tolerance: no change", 4, each(8, 2, missing=2), None, 4,
     c.NO_CHANGE),
    ("missing replicas at 0 still let a large scale-up through", 4, each(12, 2, missing=2), None, 6, c.SCALED_UP),
    ("not-ready replicas count as 0 on a scale-up: into the tolerance, no change", 4, each(8, 2, unready=2), None,
     4, c.NO_CHANGE),
    ("not-ready replicas are set aside on a scale-down", 4, each(1, 2, unready=2), None, 1, c.SCALED_DOWN),
    ("a missing replica at a ratio of exactly 1 never scales down", 4, each(4, 3, missing=1), None, 4,
     c.NO_CHANGE),
]


@pytest.mark.parametrize("name, current, reading, behavior, desired, reason", RATIO_CASES,
                         ids=[case[0] for case in RATIO_CASES])
def test_ratio_and_tolerance(name, current, reading, behavior, desired, reason) -> None:
    d = decide(scaler(10, queue(4), min_replicas=1, behavior=behavior), current, {"QueueDepth": reading},
               History(), NOW)
    assert (d.desired, d.reason) == (desired, reason), d.message


ABLE_CASES = [
    # name, current, QueueDepth average, history, AbleToScale reason
    ("a rescale is SucceededRescale (horizontal.go, after the scale update)", 1, 30, [], c.SUCCEEDED_RESCALE),
    ("a count that holds matches its recommendation: ReadyForNewScale", 3, 4, [], c.READY_FOR_NEW_SCALE),
    ("a scale-down held by the window is ScaleDownStabilized", 4, 1, [(60, 4)], c.SCALE_DOWN_STABILIZED),
    ("a scale-down the window only slows is still a rescale", 4, 1, [(60, 2)], c.SUCCEEDED_RESCALE),
]


@pytest.mark.parametrize("name, current, average, recommendations, able", ABLE_CASES,
                         ids=[case[0] for case in ABLE_CASES])
def test_able_to_scale_follows_hpa(name, current, average, recommendations, able) -> None:
    """HPA sets AbleToScale from the stabilization (ReadyForNewScale, ScaleUp/DownStabilized)
    and, once it has changed the target's scale, SucceededRescale (reconcileAutoscaler)."""
    d = decide(scaler(10, queue(4)), current, {"QueueDepth": each(average, current)}, history(recommendations), NOW)
    condition = d.condition(c.ABLE_TO_SCALE)
    assert condition is not None and condition.reason == able, (d.desired, condition)
    if able == c.SUCCEEDED_RESCALE:
        assert d.desired != current and condition.message == f"the autoscaler set the replica count to {d.desired}"


def test_exact_arithmetic() -> None:
    """In float64, 0.9 / 0.3 is 3.0000000000000004 and its ceiling 4; and HPA's float64
    product 1000m / 300m x 3 is 10.000000000000002, whose ceiling is 11. Ours is exact."""
    s = scaler(20, metric("KVCacheUtilization", 0.3), behavior={"scaleUp": rules(pods=100)})
    assert decide(s, 1, {"KVCacheUtilization": each(0.9, 1)}, History(), NOW).desired == 3
    assert decide(s, 3, {"KVCacheUtilization": each(1.0, 3)}, History(), NOW).desired == 10


def test_the_largest_proposal_over_metrics_wins() -> None:
    """HPA: "the largest of the desired replica counts is chosen"."""
    s = scaler(10, queue(4), metric("KVCacheUtilization", 0.5))
    d = decide(s, 2, {"QueueDepth": each(6, 2), "KVCacheUtilization": each(0.9, 2)}, History(), NOW)
    assert [(m.type, m.proposal) for m in d.metrics] == [("QueueDepth", 3), ("KVCacheUtilization", 4)]
    assert d.desired == 4
    assert d.condition(c.SCALING_ACTIVE).message == "the replica count is computed from KVCacheUtilization"


# --- missing and stale metrics -----------------------------------------------------------

TTFT = metric("TimeToFirstToken", 0.5, percentile=90)


@pytest.mark.parametrize("name, readings, desired, reason", [
    ("one metric unreadable, the other says scale down: skipped", {"QueueDepth": each(0.5, 4),
     "TimeToFirstToken": Unreadable("engine pods did not answer")}, 4, c.SCALE_DOWN_SKIPPED),
    ("one metric unreadable, the other says scale up: scales up", {"QueueDepth": each(12, 4),
     "TimeToFirstToken": Unreadable("engine pods did not answer")}, 8, c.SCALE_UP_LIMIT),
    ("one metric not reported at all counts as unreadable", {"QueueDepth": each(0.5, 4)}, 4, c.SCALE_DOWN_SKIPPED),
    ("every metric unreadable: no change", {"QueueDepth": Unreadable("x"), "TimeToFirstToken": Unreadable("y")},
     4, c.FAILED_GET_METRICS),
    ("no ready replica reported: unreadable", {"QueueDepth": MetricReading(0, 0, missing=4, observed_at=NOW),
     "TimeToFirstToken": each(0.1, 4)}, 4, c.SCALE_DOWN_SKIPPED),
    ("a stale reading never scales down", {"QueueDepth": MetricReading(0.5 * 4, 4, observed_at=NOW - 300),
     "TimeToFirstToken": each(0.1, 4)}, 4, c.SCALE_DOWN_SKIPPED),
    ("a reading from the future is as stale", {"QueueDepth": MetricReading(0.5 * 4, 4, observed_at=NOW + 300),
     "TimeToFirstToken": each(0.1, 4)}, 4, c.SCALE_DOWN_SKIPPED),
    ("a fresh enough reading counts", {"QueueDepth": MetricReading(0.5 * 4, 4, observed_at=NOW - 100),
     "TimeToFirstToken": each(0.1, 4)}, 1, c.SCALED_DOWN),
])
def test_missing_and_stale_metrics(name, readings, desired, reason) -> None:
    d = decide(scaler(10, queue(4), TTFT), 4, readings, History(), NOW)
    assert (d.desired, d.reason) == (desired, reason), d.message
    if reason in (c.SCALE_DOWN_SKIPPED, c.FAILED_GET_METRICS):
        assert d.condition(c.SCALING_ACTIVE).status == c.FALSE
        assert d.history == History(), "HPA records no recommendation when it cannot compute one"


def test_unreadable_reasons_are_reported_per_metric() -> None:
    d = decide(scaler(10, queue(4), TTFT), 4, {"QueueDepth": MetricReading(2, 4, observed_at=NOW - 999),
                                               "TimeToFirstToken": Unreadable("engine pods did not answer")},
               History(), NOW)
    errors = {m.type: m.error for m in d.metrics}
    assert errors == {"QueueDepth": "stale: read 999 s ago, more than 120 s from now",
                      "TimeToFirstToken": "engine pods did not answer"}
    assert "no metric could be read" in d.message


# --- min and max -------------------------------------------------------------------------

@pytest.mark.parametrize("name, current, reading, desired, reason", [
    ("current above maxReplicas goes straight to max", 12, each(100, 12), 8, c.TOO_MANY_REPLICAS),
    ("current below minReplicas goes straight to min", 1, each(0, 1), 2, c.TOO_FEW_REPLICAS),
    ("desired above maxReplicas stops at max", 6, each(40, 6), 8, c.TOO_MANY_REPLICAS),
    ("desired below minReplicas stops at min", 6, each(0, 6), 2, c.TOO_FEW_REPLICAS),
])
def test_min_and_max(name, current, reading, desired, reason) -> None:
    d = decide(scaler(8, queue(4), min_replicas=2), current, {"QueueDepth": reading}, History(), NOW)
    assert (d.desired, d.reason) == (desired, reason)
    assert d.condition(c.SCALING_LIMITED).status == c.TRUE


# --- step policies: HPA's TestScalingWithRules cases, by name and number -------------------

SCALING_WITH_RULES = [
    # name, min, max, scaleUp, scaleDown, up events, current, prenormalized, expected, condition
    ("prenormalized desired replicas within range", 3, 8, None, None, [], 5, 7, 7, c.DESIRED_WITHIN_RANGE),
    ("prenormalized desired replicas < minReplicas", 2, 8, None, None, [], 3, 1, 2, c.TOO_FEW_REPLICAS),
    ("prenormalized desired replicas within range when minReplicas is 0", 0, 10, None, None, [], 1, 0, 0,
     c.DESIRED_WITHIN_RANGE),
    ("desired replica count is more than the maximum replica count", 100, 150, None, None, [], 100, 1000, 150,
     c.TOO_MANY_REPLICAS),
    ("scaleUpLimit is the limit because scaleUpLimit < maxReplicas with user policies", 1, 1000,
     rules(percent=1), None, [], 3, 1000, 4, c.SCALE_UP_LIMIT),
    ("scaleDownLimit is the limit because scaleDownLimit > minReplicas with user defined policies", 3, 1000,
     None, rules(pods=20), [], 1000, 3, 980, c.SCALE_DOWN_LIMIT),
    ("scaleUp with default behavior", 1, 1000, None, None, [], 10, 50, 20, c.SCALE_UP_LIMIT),
    ("scaleUp with pods policy larger than percent policy", 1, 1000, rules(pods=100, percent=100), None, [], 10,
     500, 110, c.SCALE_UP_LIMIT),
    ("scaleUp with percent policy larger than pods policy", 1, 1000, rules(pods=2, percent=100), None, [], 10,
     500, 20, c.SCALE_UP_LIMIT),
    ("scaleUp with spec MaxReplicas limitation with large pod policy", 1, 1000, rules(pods=100), None, [], 10, 50,
     50, c.DESIRED_WITHIN_RANGE),
    ("scaleUp with pod policy limitation", 1, 1000, rules(pods=30), None, [], 10, 50, 40, c.SCALE_UP_LIMIT),
    ("scaleUp with percent policy limitation", 1, 1000, rules(percent=200), None, [], 10, 50, 30,
     c.SCALE_UP_LIMIT),
    ("scaleDown with percent policy larger than pod policy", 1, 1000, None, rules(pods=20, percent=1, window=300),
     [], 100, 2, 80, c.SCALE_DOWN_LIMIT),
    ("scaleDown with pod policy larger than percent policy", 1, 1000, None, rules(pods=2, percent=1, window=300),
     [], 100, 2, 98, c.SCALE_DOWN_LIMIT),
    ("scaleDown with spec MinReplicas limitation with large pod policy", 1, 1000, None, rules(pods=100, window=300),
     [], 10, 0, 1, c.TOO_FEW_REPLICAS),
    ("scaleDown with spec MinReplicas limitation with large percent policy", 5, 1000, None,
     rules(percent=100, window=300), [], 10, 2, 5, c.TOO_FEW_REPLICAS),
    ("scaleDown with pod policy limitation", 1, 1000, None, rules(pods=5, window=300), [], 10, 2, 5,
     c.SCALE_DOWN_LIMIT),
    ("scaleDown with percent policy limitation", 1, 1000, None, rules(percent=50, window=300), [], 10, 5, 5,
     c.DESIRED_WITHIN_RANGE),
    # Events 1, 5, 9 replicas, 100, 60 and 20 s ago (generateEventsUniformDistribution over 120 s).
    ("scaleUp with spec MaxReplicas limitation with large pod policy and events", 1, 200, rules(pods=300), None,
     [(100, 1), (60, 5), (20, 9)], 100, 500, 200, c.TOO_MANY_REPLICAS),
    ("scaleUp with currentReplicas limitation with rate.PeriodSeconds with a lot of recent scale up events", 1,
     1000, rules(pods=5, pods_period=120), None, [(100, 1), (60, 5), (20, 9)], 100, 500, 100, c.SCALE_UP_LIMIT),
    ("scaleUp with pod policy and previous scale up events", 1, 1000, rules(pods=150, pods_period=120), None,
     [(100, 1), (60, 5), (20, 9)], 100, 500, 235, c.SCALE_UP_LIMIT),
    ("selectPolicy Min: the policy allowing the smallest change wins", 1, 1000,
     rules(pods=4, percent=100, select="Min"), None, [], 10, 50, 14, c.SCALE_UP_LIMIT),
    ("selectPolicy Disabled on scale-down: never scales down", 1, 1000, None, {"selectPolicy": "Disabled"}, [],
     10, 1, 10, c.SCALE_DOWN_LIMIT),
    ("selectPolicy Disabled on scale-up: never scales up", 1, 1000, {"selectPolicy": "Disabled"}, None, [], 10, 50,
     10, c.SCALE_UP_LIMIT),
]


@pytest.mark.parametrize("name, low, high, up, down, events, current, prenormalized, expected, reason",
                         SCALING_WITH_RULES, ids=[case[0] for case in SCALING_WITH_RULES])
def test_scaling_with_rules(name, low, high, up, down, events, current, prenormalized, expected, reason) -> None:
    behavior = {k: v for k, v in (("scaleUp", up), ("scaleDown", down)) if v is not None} or None
    s = scaler(high, queue(1), min_replicas=low, behavior=behavior)
    # QueueDepth target 1 with `prenormalized` requests in all: the metrics ask for exactly that.
    reading = MetricReading(prenormalized, current, observed_at=NOW)
    d = decide(s, current, {"QueueDepth": reading}, history(up=events), NOW)
    assert d.recommendation == prenormalized
    assert (d.desired, d.condition(c.SCALING_LIMITED).reason) == (expected, reason), d.message


def test_changes_within_a_period_count_against_the_other_direction() -> None:
    """calculateScaleUpLimitWithScalingRules: period start = current - added + removed, so
    2 removed 30 s ago allow 2 more on top of the policy's 4 (from 8: 6 + 2 + 4 = 12)."""
    s = scaler(100, queue(1), behavior={"scaleUp": rules(pods=4, pods_period=60)})
    d = decide(s, 6, {"QueueDepth": MetricReading(50, 6, observed_at=NOW)}, history(down=[(30, 2)]), NOW)
    assert d.desired == 12


# --- stabilization: TestNormalizeDesiredReplicas's cases, then sequences ----------------

@pytest.mark.parametrize("name, recommendations, current, proposal, expected, log_length", [
    ("empty log", [], 5, 5, 5, 1),
    ("stabilize", [(120, 4), (60, 5)], 6, 3, 5, 3),
    ("no stabilize", [(120, 1), (60, 2)], 3, 3, 3, 3),
    ("no stabilize - old recommendations", [(600, 10), (540, 9)], 4, 3, 3, 1),
    ("stabilize - old recommendations", [(600, 10), (60, 4), (120, 5), (540, 9)], 6, 3, 5, 3),
])
def test_normalize_desired_replicas(name, recommendations, current, proposal, expected, log_length) -> None:
    """The 300 s scale-down window keeps the highest recent recommendation; recommendations
    older than every window are dropped from the log."""
    d = decide(scaler(10, queue(1)), current, {"QueueDepth": MetricReading(proposal, current, observed_at=NOW)},
               history(recommendations), NOW)
    assert d.recommendation == proposal
    assert d.desired == expected
    assert len(d.history.recommendations) == log_length


def test_scale_up_window_holds_the_lowest_recent_recommendation() -> None:
    s = scaler(10, queue(4), behavior={"scaleUp": {"stabilizationWindowSeconds": 60}})
    held = decide(s, 2, {"QueueDepth": each(12, 2)}, history([(30, 2)]), NOW)
    assert (held.desired, held.reason) == (2, c.SCALE_UP_STABILIZED)
    later = decide(s, 2, {"QueueDepth": each(12, 2)}, history([(61, 2), (30, 6)]), NOW)
    assert later.desired == 6


def test_a_load_drop_scales_down_only_after_the_window() -> None:
    """HPA: "When the metrics indicate that the target should be scaled down the algorithm
    looks into previously computed desired states, and uses the highest value from the
    specified interval" — so a burst then quiet waits 300 s before replicas go."""
    s = scaler(10, queue(4))
    h, current, seen = History(), 2, []
    for t, average in [(0, 16), (15, 1), (150, 1), (299, 1), (315, 1)]:
        d = decide(s, current, {"QueueDepth": MetricReading(average * current, current, observed_at=NOW + t)}, h,
                   NOW + t)
        h, current = d.history, d.desired
        seen.append((t, current, d.reason))
    assert seen == [(0, 6, c.SCALE_UP_LIMIT), (15, 6, c.SCALE_DOWN_STABILIZED), (150, 6, c.SCALE_DOWN_STABILIZED),
                    (299, 6, c.SCALE_DOWN_STABILIZED), (315, 2, c.SCALED_DOWN)]


def test_seeded_history_makes_the_first_scale_down_wait_as_hpa_does() -> None:
    """horizontal.go recordInitialRecommendation: the current count is the first recommendation."""
    d = decide(scaler(10, queue(4)), 4, {"QueueDepth": each(1, 4)}, History.seeded(4, NOW - 10), NOW)
    assert (d.desired, d.reason) == (4, c.SCALE_DOWN_STABILIZED)


# --- zero --------------------------------------------------------------------------------

def test_parked_deployment_is_not_scaled() -> None:
    """Implicit maintenance-mode deactivation: replicas 0 and minReplicas 1."""
    d = decide(scaler(10, queue(4), min_replicas=1), 0, {"QueueDepth": MetricReading(50, 0)}, History(), NOW)
    assert (d.desired, d.reason) == (0, c.SCALING_DISABLED)
    assert d.condition(c.SCALING_ACTIVE).status == c.FALSE
    assert "set spec.replicas to 1 or more, or minReplicas: 0" in d.message


ZERO = [
    # name, current, readings, history, behavior, desired
    ("waiting requests wake the deployment: ceil(9 waiting / 4)", 0,
     {"QueueDepth": MetricReading(9, 0, observed_at=NOW)}, [], None, 3),
    ("nothing waiting stays at zero", 0, {"QueueDepth": MetricReading(0, 0, observed_at=NOW)}, [], None, 0),
    ("waking skips the scale-up window (as SkyServe's upscale delay)", 0,
     {"QueueDepth": MetricReading(1, 0, observed_at=NOW)}, [(10, 0)],
     {"scaleUp": {"stabilizationWindowSeconds": 300}}, 1),
    ("a Percent-only scale-up policy still wakes one replica", 0,
     {"QueueDepth": MetricReading(40, 0, observed_at=NOW)}, [], {"scaleUp": rules(percent=100, pods_period=15)}, 1),
    ("scaleUp Disabled keeps a parked-at-zero deployment at zero", 0,
     {"QueueDepth": MetricReading(40, 0, observed_at=NOW)}, [], {"scaleUp": {"selectPolicy": "Disabled"}}, 0),
    ("the KV cache has no value at zero; the queue decides", 0,
     {"QueueDepth": MetricReading(5, 0, observed_at=NOW), "KVCacheUtilization": Unreadable("no pod")}, [], None, 2),
    ("an idle deployment with minReplicas 0 goes to zero on a first decision", 2,
     {"QueueDepth": each(0, 2), "KVCacheUtilization": each(0, 2)}, [], None, 0),
    ("an idle deployment waits the scale-down window before zero", 2,
     {"QueueDepth": each(0, 2), "KVCacheUtilization": each(0, 2)}, [(60, 2)], None, 2),
]


@pytest.mark.parametrize("name, current, readings, recommendations, behavior, desired", ZERO,
                         ids=[case[0] for case in ZERO])
def test_scale_to_and_from_zero(name, current, readings, recommendations, behavior, desired) -> None:
    s = scaler(10, queue(4), metric("KVCacheUtilization", 0.8), min_replicas=0, behavior=behavior)
    d = decide(s, current, readings, history(recommendations), NOW)
    assert d.desired == desired, d.message


def test_from_zero_the_message_says_what_waits() -> None:
    s = scaler(10, queue(4), metric("KVCacheUtilization", 0.8), min_replicas=0)
    d = decide(s, 0, {"QueueDepth": MetricReading(9, 0, observed_at=NOW)}, History(), NOW)
    assert "QueueDepth 9 for the deployment, no replica running (target 4) -> 3" in d.message
    assert "KVCacheUtilization unreadable (no value while no replica runs)" in d.message


# --- history: plain JSON, bounded, validated -------------------------------------------

def test_history_round_trips_through_json() -> None:
    s = scaler(10, queue(4))
    d = decide(s, 3, {"QueueDepth": each(8, 3)}, History(), NOW)
    doc = d.history.to_json()
    assert doc == {"recommendations": [{"at": NOW, "replicas": 6}], "scaleUp": [{"at": NOW, "change": 3}],
                   "scaleDown": []}
    assert History.from_json(doc) == d.history
    assert d.to_json()["history"] == doc


def test_history_keeps_only_what_a_window_or_period_can_count() -> None:
    s = scaler(10, queue(4))   # windows 0 / 300 s, periods 15 s
    old = history([(301, 9), (299, 5)], up=[(16, 2), (14, 1)], down=[(100, 1)])
    d = decide(s, 5, {"QueueDepth": each(4, 5)}, old, NOW)
    assert [r.replicas for r in d.history.recommendations] == [5, 5]
    assert [e.change for e in d.history.scale_up] == [1]
    assert d.history.scale_down == ()


@pytest.mark.parametrize("doc, words", [
    ([], "$: expected an object"),
    ({"recommendations": {}}, "$.recommendations: expected a list"),
    ({"extra": []}, "$: unknown key 'extra'"),
    ({"recommendations": [{"at": 1.0}]}, "$.recommendations[0]: expected"),
    ({"recommendations": [{"at": float("nan"), "replicas": 1}]}, "$.recommendations[0].at: expected a finite"),
    ({"recommendations": [{"at": True, "replicas": 1}]}, "$.recommendations[0].at"),
    ({"recommendations": [{"at": 1.0, "replicas": -1}]}, "$.recommendations[0].replicas: expected a whole number"),
    ({"recommendations": [{"at": 1.0, "replicas": 2.0}]}, "$.recommendations[0].replicas"),
    ({"scaleUp": [{"at": 1.0, "change": 0}]}, "$.scaleUp[0].change: expected a whole number 1..1000"),
    ({"scaleDown": [{"at": 1.0, "change": 10**30}]}, "$.scaleDown[0].change"),
    ({"scaleUp": [{"at": 1.0, "change": 1}] * (MAX_ENTRIES + 1)}, f"at most {MAX_ENTRIES} are kept"),
])
def test_hostile_history_is_refused_with_its_path(doc, words) -> None:
    with pytest.raises(HistoryFormatError) as exc:
        History.from_json(doc)
    assert words in str(exc.value)


def test_a_reading_refuses_nan_negative_and_wrong_types() -> None:
    for bad in (dict(total=float("nan"), reporting=1), dict(total=-1, reporting=1),
                dict(total=1, reporting=True), dict(total=1, reporting=-1), dict(total=1, reporting=10**6),
                dict(total=1, reporting=1, observed_at=float("inf"))):
        with pytest.raises(ValueError):
            MetricReading(**bad)


def test_decide_is_pure() -> None:
    s = scaler(10, queue(4), TTFT)
    readings = {"QueueDepth": each(8, 3), "TimeToFirstToken": each(0.2, 3)}
    h = history([(10, 3)], up=[(5, 1)])
    assert decide(s, 3, readings, h, NOW) == decide(s, 3, readings, h, NOW)
    assert h == history([(10, 3)], up=[(5, 1)])
