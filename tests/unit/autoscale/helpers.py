"""Builders for decision tests: an autoscaler from a few fields, readings, histories."""

from __future__ import annotations

from typing import Any

from modelplane.api.replica_autoscaler import ReplicaAutoscaler
from modelplane.autoscale import History, MetricReading
from modelplane.autoscale.history import Recommendation, ScaleEvent
from tests.manifests import metric, replica_autoscaler

NOW = 1_000_000.0


def scaler(max_replicas: int = 10, *metrics: dict[str, Any], min_replicas: int | None = None,
           behavior: dict[str, Any] | None = None) -> ReplicaAutoscaler:
    doc = replica_autoscaler("a", "m", max_replicas, *metrics, min_replicas=min_replicas, behavior=behavior)
    return ReplicaAutoscaler.model_validate(doc)


def queue(target: float = 4) -> dict[str, Any]:
    return metric("QueueDepth", target)


def rules(pods: int = 0, pods_period: int = 60, percent: int = 0, percent_period: int = 60, window: int = 0,
          select: str | None = None) -> dict[str, Any]:
    """HPA's generateScalingRules (horizontal_test.go): the policies a test names, and a window."""
    policies = []
    if pods:
        policies.append({"type": "Pods", "value": pods, "periodSeconds": pods_period})
    if percent:
        policies.append({"type": "Percent", "value": percent, "periodSeconds": percent_period})
    out: dict[str, Any] = {"stabilizationWindowSeconds": window, "policies": policies}
    if select:
        out["selectPolicy"] = select
    return out


def each(average: float, replicas: int, **counts: int) -> MetricReading:
    """`average` on each of `replicas` reporting replicas, plus missing / unready ones."""
    return MetricReading(average * replicas, replicas, observed_at=NOW, **counts)


def history(recommendations: list[tuple[float, int]] = (), up: list[tuple[float, int]] = (),
            down: list[tuple[float, int]] = ()) -> History:
    """Entries as (seconds before NOW, value)."""
    return History(tuple(Recommendation(NOW - ago, n) for ago, n in recommendations),
                   tuple(ScaleEvent(NOW - ago, n) for ago, n in up),
                   tuple(ScaleEvent(NOW - ago, n) for ago, n in down))
