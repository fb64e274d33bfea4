"""The autoscaler's condition types and reasons: HPA's three conditions, by HPA's names
(kubernetes api/autoscaling/v2 HorizontalPodAutoscalerConditionType and the reasons
pkg/controller/podautoscaler/horizontal.go sets), plus the reason ours adds when the
fleet scheduler places fewer replicas than the autoscaler asked for.

One home: the decision, `plan` and (later) the placement resource's state all use these.
"""

from __future__ import annotations

from modelplane.scheduler import Condition

# HPA: "AbleToScale indicates a lack of transient issues which prevent scaling".
ABLE_TO_SCALE = "AbleToScale"
# HPA: "ScalingActive indicates that the HPA controller is able to scale if necessary".
SCALING_ACTIVE = "ScalingActive"
# HPA: "ScalingLimited indicates that the calculated scale based on metrics would be above
# or below the range for the HPA, and has thus been capped". Ours also sets it when the
# scheduler could not place every replica the autoscaler asked for (PLACEMENT_LIMITED).
SCALING_LIMITED = "ScalingLimited"

# AbleToScale reasons (HPA's): SucceededRescale when the count changed, else what the
# stabilization did.
SUCCEEDED_RESCALE = "SucceededRescale"
READY_FOR_NEW_SCALE = "ReadyForNewScale"
SCALE_UP_STABILIZED = "ScaleUpStabilized"
SCALE_DOWN_STABILIZED = "ScaleDownStabilized"
# ScalingActive reasons (HPA's, ours for a skipped scale-down).
VALID_METRIC_FOUND = "ValidMetricFound"
FAILED_GET_METRICS = "FailedGetMetrics"
SCALE_DOWN_SKIPPED = "ScaleDownSkippedMissingMetrics"
SCALING_DISABLED = "ScalingDisabled"
# ScalingLimited reasons (HPA's, and PLACEMENT_LIMITED).
DESIRED_WITHIN_RANGE = "DesiredWithinRange"
TOO_MANY_REPLICAS = "TooManyReplicas"
TOO_FEW_REPLICAS = "TooFewReplicas"
SCALE_UP_LIMIT = "ScaleUpLimit"
SCALE_DOWN_LIMIT = "ScaleDownLimit"
PLACEMENT_LIMITED = "PlacementLimited"

# What a decision did, when no condition above explains it.
SCALED_UP = "ScaledUp"
SCALED_DOWN = "ScaledDown"
NO_CHANGE = "NoChange"

TRUE = "True"
FALSE = "False"


def condition(type_: str, *, status: bool, reason: str, message: str) -> Condition:
    return Condition(type_, TRUE if status else FALSE, reason, message)


__all__ = [
    "ABLE_TO_SCALE", "DESIRED_WITHIN_RANGE", "FAILED_GET_METRICS", "FALSE", "NO_CHANGE", "PLACEMENT_LIMITED",
    "READY_FOR_NEW_SCALE", "SCALE_DOWN_LIMIT", "SCALE_DOWN_SKIPPED", "SCALE_DOWN_STABILIZED", "SCALE_UP_LIMIT",
    "SCALE_UP_STABILIZED", "SCALED_DOWN", "SCALED_UP", "SCALING_ACTIVE", "SCALING_DISABLED", "SCALING_LIMITED",
    "SUCCEEDED_RESCALE", "TOO_FEW_REPLICAS", "TOO_MANY_REPLICAS", "TRUE", "VALID_METRIC_FOUND", "condition",
]
