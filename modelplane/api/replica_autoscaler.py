"""`ReplicaAutoscaler`: replicas of a ModelDeployment that follow live load (ours, not the reference's).

Shaped like a Kubernetes HorizontalPodAutoscaler (`autoscaling/v2`), in our own API group
beside FleetBudget, so a reference control plane answers "no matches for kind" instead of
silently ignoring it:

    apiVersion: placement.modelplane-pulumi.dev/v1alpha1
    kind: ReplicaAutoscaler
    metadata: {name: chat, namespace: ml-team}
    spec:
      scaleTargetRef: {name: chat}          # a ModelDeployment of this namespace
      minReplicas: 1                        # 0 allowed: the deployment parks when idle
      maxReplicas: 6
      metrics:
      - {type: QueueDepth, target: {averageValue: 4}}
      - {type: TimeToFirstToken, percentile: 90, target: {averageValue: 0.5}}
      behavior:                             # HPA's HorizontalPodAutoscalerBehavior
        scaleDown: {stabilizationWindowSeconds: 300}

Every value is per ready replica of the target (HPA's `Pods` metric with an
`averageValue` target). The bounds and defaults are HPA's (kubernetes
pkg/apis/autoscaling/validation/validation.go, pkg/apis/autoscaling/v2/defaults.go);
docs/autoscaling.md explains each field and the decision.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from modelplane.suggest import did_you_mean

from .common import ApiModel, KindObject, check_dns_subdomain, check_unique
from .model_deployment import MAX_REPLICAS, ModelDeployment
from .placement_policy import FLEET_BUDGET_API_VERSION

# The group FleetBudget lives in (placement.py defines its version constant).
REPLICA_AUTOSCALER_API_VERSION = FLEET_BUDGET_API_VERSION
KIND = "ReplicaAutoscaler"

QUEUE_DEPTH = "QueueDepth"                  # requests waiting, per ready replica
REQUESTS_RUNNING = "RequestsRunning"        # requests in the engine's batch, per ready replica
KV_CACHE_UTILIZATION = "KVCacheUtilization"  # fraction of the KV cache in use, 0..1
TIME_TO_FIRST_TOKEN = "TimeToFirstToken"    # seconds, at `percentile`
METRIC_TYPES = (QUEUE_DEPTH, REQUESTS_RUNNING, KV_CACHE_UTILIZATION, TIME_TO_FIRST_TOKEN)
# Metrics that still have a value when no replica runs (requests waiting for the
# deployment): only these can wake a deployment from zero.
WAKING_METRICS = (QUEUE_DEPTH, REQUESTS_RUNNING)

# The largest value a reading or a target of each type may hold: a count of requests per
# replica, a fraction, seconds. Past them the number is a mistake, not a load.
METRIC_VALUE_MAX: Mapping[str, float] = {
    QUEUE_DEPTH: 1_000_000.0,
    REQUESTS_RUNNING: 1_000_000.0,
    KV_CACHE_UTILIZATION: 1.0,
    TIME_TO_FIRST_TOKEN: 3600.0,
}
METRIC_UNITS: Mapping[str, str] = {
    QUEUE_DEPTH: "requests waiting per ready replica",
    REQUESTS_RUNNING: "requests running per ready replica",
    KV_CACHE_UTILIZATION: "a fraction of the KV cache, 0..1 (1 means 100 percent, as vLLM's gauge)",
    TIME_TO_FIRST_TOKEN: "seconds",
}

MAX_METRICS = len(METRIC_TYPES)
MAX_POLICIES = 10
# HPA's own bounds (validation.go: MaxPeriodSeconds, MaxStabilizationWindowSeconds).
MAX_PERIOD_SECONDS = 1800
MAX_STABILIZATION_WINDOW_SECONDS = 3600
MAX_PERCENT = 10_000
# HPA's defaults (defaults.go, and the controller's --horizontal-pod-autoscaler-tolerance
# and --horizontal-pod-autoscaler-downscale-stabilization).
DEFAULT_TOLERANCE = 0.1
DEFAULT_SCALE_DOWN_WINDOW_SECONDS = 300
DEFAULT_POLICY_PERIOD_SECONDS = 15

class ScaleTargetRef(ApiModel):
    """HPA's CrossVersionObjectReference, narrowed to the one kind we scale."""

    name: str
    kind: Literal["ModelDeployment"] = "ModelDeployment"
    api_version: Literal["modelplane.ai/v1alpha1"] = "modelplane.ai/v1alpha1"

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        return check_dns_subdomain(value, "scaleTargetRef.name")


class MetricTarget(ApiModel):
    # The value each ready replica should carry on average (HPA: target.averageValue).
    average_value: Annotated[float, Field(gt=0, allow_inf_nan=False)]


class MetricSpec(ApiModel):
    type: Literal["QueueDepth", "RequestsRunning", "KVCacheUtilization", "TimeToFirstToken"]
    target: MetricTarget
    # TimeToFirstToken only: which percentile of the engine's histogram, e.g. 90 for p90.
    percentile: Annotated[float, Field(gt=0, lt=100, allow_inf_nan=False)] | None = None

    @model_validator(mode="after")
    def _rules(self) -> MetricSpec:
        limit = METRIC_VALUE_MAX[self.type]
        if self.target.average_value > limit:
            raise ValueError(f"{self.type} target.averageValue {self.target.average_value:g} is above {limit:g}; "
                             f"it is {METRIC_UNITS[self.type]}")
        if self.type == TIME_TO_FIRST_TOKEN and self.percentile is None:
            raise ValueError("TimeToFirstToken needs percentile (e.g. percentile: 90 for p90): the engines "
                             "export time to first token as a histogram")
        if self.type != TIME_TO_FIRST_TOKEN and self.percentile is not None:
            raise ValueError(f"percentile applies to TimeToFirstToken only; remove it from {self.type}")
        return self


class ScalingPolicy(ApiModel):
    """HPA's HPAScalingPolicy: at most `value` pods (or percent) change per `periodSeconds`."""

    type: Literal["Pods", "Percent"]
    value: Annotated[int, Field(ge=1)]
    period_seconds: Annotated[int, Field(ge=1, le=MAX_PERIOD_SECONDS)]

    @model_validator(mode="after")
    def _bounded(self) -> ScalingPolicy:
        limit = MAX_REPLICAS if self.type == "Pods" else MAX_PERCENT
        if self.value > limit:
            raise ValueError(f"a {self.type} policy's value {self.value} is above {limit}; lower it")
        return self


class ScalingRules(ApiModel):
    """HPA's HPAScalingRules for one direction. Unset fields take HPA's defaults for that
    direction (`ScalingBehavior.scale_up` / `.scale_down`)."""

    stabilization_window_seconds: Annotated[int, Field(ge=0, le=MAX_STABILIZATION_WINDOW_SECONDS)] | None = None
    select_policy: Literal["Max", "Min", "Disabled"] | None = None
    policies: Annotated[list[ScalingPolicy], Field(min_length=1, max_length=MAX_POLICIES)] | None = None
    # HPA's configurable tolerance (KEP-4951): the ratio band around 1.0 that never scales.
    tolerance: Annotated[float, Field(ge=0, lt=1, allow_inf_nan=False)] | None = None


class Behavior(ApiModel):
    scale_up: ScalingRules | None = None
    scale_down: ScalingRules | None = None


class ReplicaAutoscalerSpec(ApiModel):
    scale_target_ref: ScaleTargetRef
    min_replicas: Annotated[int, Field(ge=0, le=MAX_REPLICAS)] = 1
    max_replicas: Annotated[int, Field(ge=1, le=MAX_REPLICAS)]
    metrics: Annotated[list[MetricSpec], Field(min_length=1, max_length=MAX_METRICS)]
    behavior: Behavior | None = None

    @field_validator("metrics")
    @classmethod
    def _unique(cls, metrics: list[MetricSpec]) -> list[MetricSpec]:
        return check_unique(metrics, "metrics[].type", key=lambda m: m.type)

    @model_validator(mode="after")
    def _range(self) -> ReplicaAutoscalerSpec:
        if self.max_replicas < self.min_replicas:
            raise ValueError(f"maxReplicas {self.max_replicas} is below minReplicas {self.min_replicas}; "
                             "raise maxReplicas or lower minReplicas")
        if self.min_replicas == 0 and not any(m.type in WAKING_METRICS for m in self.metrics):
            raise ValueError("minReplicas 0 needs a QueueDepth or RequestsRunning metric: with no replica "
                             "running, only requests waiting for the deployment can wake it (KV cache and "
                             "time to first token have no value then); add one or set minReplicas: 1")
        return self

    def metric(self, type_: str) -> MetricSpec | None:
        return next((m for m in self.metrics if m.type == type_), None)


class ReplicaAutoscaler(KindObject):
    """Scales `spec.scaleTargetRef`'s replicas between min and max on its engines' load."""

    api_version: Literal["placement.modelplane-pulumi.dev/v1alpha1"]
    kind: Literal["ReplicaAutoscaler"]
    spec: ReplicaAutoscalerSpec

    NAMESPACED: ClassVar[bool] = True
    SERVED_API_VERSION: ClassVar[str] = REPLICA_AUTOSCALER_API_VERSION

    @field_validator("api_version")
    @classmethod
    def _api_version(cls, value: str) -> str:
        # Overrides KindObject's check: this kind is served by our own group.
        return value

    @property
    def target_key(self) -> tuple[str, str]:
        return (self.metadata.namespace or "default", self.spec.scale_target_ref.name)


Key = tuple[str, str]


def target_problems(autoscalers: Mapping[Key, ReplicaAutoscaler], deployments: Mapping[Key, ModelDeployment],
                    source_of: Mapping[Key, str]) -> list[tuple[ReplicaAutoscaler, str, str]]:
    """(autoscaler, field path, message) for every target that is missing or scaled twice;
    the loader turns them into manifest issues."""
    out: list[tuple[ReplicaAutoscaler, str, str]] = []
    first: dict[Key, tuple[Key, ReplicaAutoscaler]] = {}
    for key in sorted(autoscalers):
        scaler = autoscalers[key]
        target = scaler.target_key
        if target not in deployments:
            same = [n for ns, n in sorted(deployments) if ns == target[0]]
            out.append((scaler, "spec.scaleTargetRef.name",
                        f"ModelDeployment {target[0]}/{target[1]} does not exist (deployments in namespace "
                        f"{target[0]}: {', '.join(same) or 'none'}){did_you_mean(target[1], same)}; "
                        "name a ModelDeployment of the autoscaler's own namespace"))
        elif target in first:
            other_key, other = first[target]
            out.append((scaler, "spec.scaleTargetRef.name",
                        f"ModelDeployment {target[0]}/{target[1]} is already scaled by ReplicaAutoscaler "
                        f"{other.metadata.namespace}/{other.name} ({source_of.get(other_key, '<unknown>')}); "
                        "two autoscalers would fight over its replicas: keep one"))
        else:
            first[target] = (key, scaler)
    return out


__all__ = [
    "DEFAULT_POLICY_PERIOD_SECONDS", "DEFAULT_SCALE_DOWN_WINDOW_SECONDS", "DEFAULT_TOLERANCE", "KIND",
    "KV_CACHE_UTILIZATION", "METRIC_TYPES", "METRIC_UNITS", "METRIC_VALUE_MAX", "QUEUE_DEPTH",
    "REPLICA_AUTOSCALER_API_VERSION", "REQUESTS_RUNNING", "TIME_TO_FIRST_TOKEN", "WAKING_METRICS", "Behavior",
    "MetricSpec", "MetricTarget", "ReplicaAutoscaler", "ReplicaAutoscalerSpec", "ScaleTargetRef", "ScalingPolicy",
    "ScalingRules", "target_problems",
]
