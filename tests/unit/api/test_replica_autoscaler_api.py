"""`ReplicaAutoscaler` loads, defaults and fails like every other kind: file, document,
kind and name, field path, what is wrong and the fix. Bounds are HPA's where HPA has one
(kubernetes pkg/apis/autoscaling/validation/validation.go: maxReplicas >= 1 and >=
minReplicas, policies non-empty with value > 0 and 0 < periodSeconds <= 1800,
0 <= stabilizationWindowSeconds <= 3600, selectPolicy Max | Min | Disabled, minReplicas 0
only with a metric that has a value at zero pods)."""

import typing

import pytest

from modelplane.api import ManifestError, load_documents, load_manifest_text
from modelplane.api.replica_autoscaler import METRIC_TYPES, MetricSpec
from tests.manifests import BUDGET_API, deployment, metric, replica_autoscaler, to_yaml


def error(docs: list[dict]) -> str:
    with pytest.raises(ManifestError) as exc:
        load_manifest_text(to_yaml(docs), "team.yaml")
    return str(exc.value)


def scaler_error(**spec) -> str:
    doc = replica_autoscaler("a", "chat", namespace="ml")
    doc["spec"].update(spec)
    return error([deployment("chat", 1, namespace="ml"), doc])


def test_defaults_and_round_trip() -> None:
    docs = [deployment("chat", 2, namespace="ml"), replica_autoscaler("a", "chat", 6, namespace="ml")]
    fleet = load_manifest_text(to_yaml(docs))
    (scaler,) = fleet.autoscalers.values()
    assert fleet.autoscalers == {("ml", "a"): scaler}
    spec = scaler.spec
    assert (spec.min_replicas, spec.max_replicas, spec.behavior) == (1, 6, None)
    assert (spec.scale_target_ref.kind, spec.scale_target_ref.api_version) == ("ModelDeployment",
                                                                               "modelplane.ai/v1alpha1")
    assert scaler.target_key == ("ml", "chat")
    assert fleet.autoscaler_for(("ml", "chat")) is scaler and fleet.autoscaler_for(("ml", "other")) is None
    assert fleet.source_of(scaler) == "<string>#1"
    # How the fleet travels through Pulumi inputs and back (the placement resource, the pack).
    again = load_documents(fleet.to_documents())
    assert again.to_documents() == fleet.to_documents()
    assert again.autoscalers[("ml", "a")].spec == spec


def test_metric_types_are_the_documented_four() -> None:
    literal = typing.get_args(MetricSpec.model_fields["type"].annotation)
    assert literal == METRIC_TYPES == ("QueueDepth", "RequestsRunning", "KVCacheUtilization", "TimeToFirstToken")


def test_full_hpa_shaped_spec_loads() -> None:
    behavior = {"scaleUp": {"stabilizationWindowSeconds": 30, "selectPolicy": "Min", "tolerance": 0.05,
                            "policies": [{"type": "Pods", "value": 2, "periodSeconds": 60},
                                         {"type": "Percent", "value": 50, "periodSeconds": 60}]},
                "scaleDown": {"selectPolicy": "Disabled"}}
    doc = replica_autoscaler("a", "chat", 8, metric("QueueDepth", 4), metric("RequestsRunning", 16),
                             metric("KVCacheUtilization", 0.8), metric("TimeToFirstToken", 0.5, percentile=90),
                             min_replicas=0, behavior=behavior)
    doc["spec"]["scaleTargetRef"] = {"name": "chat", "kind": "ModelDeployment", "apiVersion": "modelplane.ai/v1alpha1"}
    fleet = load_manifest_text(to_yaml([deployment("chat", 1), doc]))
    spec = fleet.autoscalers[("default", "a")].spec
    assert spec.min_replicas == 0
    assert spec.metric("TimeToFirstToken").percentile == 90
    assert spec.behavior.scale_up.policies[1].type == "Percent"
    assert spec.behavior.scale_down.select_policy == "Disabled" and spec.behavior.scale_down.policies is None


@pytest.mark.parametrize("spec, path, words", [
    ({"maxReplicas": 0}, "spec.maxReplicas", "greater than or equal to 1"),
    ({"maxReplicas": 1001}, "spec.maxReplicas", "less than or equal to 1000"),
    ({"minReplicas": 5, "maxReplicas": 4}, "spec", "maxReplicas 4 is below minReplicas 5; raise maxReplicas"),
    ({"minReplicas": -1}, "spec.minReplicas", "greater than or equal to 0"),
    ({"maxReplicas": "4"}, "spec.maxReplicas", "valid integer"),
    ({"maxReplicas": 4.0}, "spec.maxReplicas", "valid integer"),
    ({"maxReplicas": True}, "spec.maxReplicas", "valid integer"),
    ({"metrics": []}, "spec.metrics", "at least 1 item"),
    ({"metrics": [metric("QueueDepth", 4), metric("QueueDepth", 2)]}, "spec.metrics",
     "metrics[].type must be unique; QueueDepth appears more than once"),
    ({"metrics": [metric("GPUUtilization", 50)]}, "spec.metrics[0].type", "Input should be 'QueueDepth'"),
    ({"metrics": [metric("QueueDepth", 0)]}, "spec.metrics[0].target.averageValue", "greater than 0"),
    ({"metrics": [metric("QueueDepth", -3)]}, "spec.metrics[0].target.averageValue", "greater than 0"),
    ({"metrics": [metric("QueueDepth", float("nan"))]}, "spec.metrics[0].target.averageValue",
     "finite number"),
    ({"metrics": [metric("QueueDepth", float("inf"))]}, "spec.metrics[0].target.averageValue",
     "finite number"),
    ({"metrics": [metric("QueueDepth", 1e300)]}, "spec.metrics[0]", "QueueDepth target.averageValue 1e+300 is above"),
    ({"metrics": [{"type": "QueueDepth", "target": {"averageValue": "4"}}]},
     "spec.metrics[0].target.averageValue", "valid number"),
    ({"metrics": [{"type": "QueueDepth", "target": {"averageValue": True}}]},
     "spec.metrics[0].target.averageValue", "valid number"),
    ({"metrics": [{"type": "QueueDepth", "target": {"value": 4}}]}, "spec.metrics[0].target.value",
     "unknown field 'value'; fields allowed here: averageValue"),
    ({"metrics": [metric("KVCacheUtilization", 85)]}, "spec.metrics[0]",
     "KVCacheUtilization target.averageValue 85 is above 1; it is a fraction of the KV cache, 0..1"),
    ({"metrics": [metric("TimeToFirstToken", 0.5)]}, "spec.metrics[0]",
     "TimeToFirstToken needs percentile (e.g. percentile: 90 for p90)"),
    ({"metrics": [metric("TimeToFirstToken", 0.5, percentile=100)]}, "spec.metrics[0].percentile", "less than 100"),
    ({"metrics": [metric("QueueDepth", 4, percentile=90)]}, "spec.metrics[0]",
     "percentile applies to TimeToFirstToken only; remove it from QueueDepth"),
    ({"minReplicas": 0, "metrics": [metric("KVCacheUtilization", 0.8)]}, "spec",
     "minReplicas 0 needs a QueueDepth or RequestsRunning metric"),
    ({"behavior": {"scaleUp": {"policies": []}}}, "spec.behavior.scaleUp.policies", "at least 1 item"),
    ({"behavior": {"scaleUp": {"policies": [{"type": "Pods", "value": 0, "periodSeconds": 15}]}}},
     "spec.behavior.scaleUp.policies[0].value", "greater than or equal to 1"),
    ({"behavior": {"scaleUp": {"policies": [{"type": "Pods", "value": 1001, "periodSeconds": 15}]}}},
     "spec.behavior.scaleUp.policies[0]", "a Pods policy's value 1001 is above 1000"),
    ({"behavior": {"scaleDown": {"policies": [{"type": "Percent", "value": 10, "periodSeconds": 1801}]}}},
     "spec.behavior.scaleDown.policies[0].periodSeconds", "less than or equal to 1800"),
    ({"behavior": {"scaleDown": {"policies": [{"type": "Replicas", "value": 1, "periodSeconds": 15}]}}},
     "spec.behavior.scaleDown.policies[0].type", "Input should be 'Pods' or 'Percent'"),
    ({"behavior": {"scaleDown": {"stabilizationWindowSeconds": 3601}}},
     "spec.behavior.scaleDown.stabilizationWindowSeconds", "less than or equal to 3600"),
    ({"behavior": {"scaleDown": {"stabilizationWindowSeconds": -1}}},
     "spec.behavior.scaleDown.stabilizationWindowSeconds", "greater than or equal to 0"),
    ({"behavior": {"scaleDown": {"selectPolicy": "Largest"}}}, "spec.behavior.scaleDown.selectPolicy",
     "Input should be 'Max', 'Min' or 'Disabled'"),
    ({"behavior": {"scaleDown": {"tolerance": 1}}}, "spec.behavior.scaleDown.tolerance", "less than 1"),
    ({"behavior": {"scaleDown": {"tolerance": float("nan")}}}, "spec.behavior.scaleDown.tolerance",
     "finite number"),
    ({"behavior": {"scaleDwn": {}}}, "spec.behavior.scaleDwn",
     "unknown field 'scaleDwn'; fields allowed here: scaleDown, scaleUp"),
    ({"scaleTargetRef": {"name": "chat", "kind": "Deployment"}}, "spec.scaleTargetRef.kind",
     "Input should be 'ModelDeployment'"),
    ({"scaleTargetRef": {"name": "Chat Model"}}, "spec.scaleTargetRef.name", "is not a valid Kubernetes name"),
    ({"targetReplicas": 3}, "spec.targetReplicas", "unknown field 'targetReplicas'"),
])
def test_invalid_spec(spec, path, words) -> None:
    text = scaler_error(**spec)
    assert f"team.yaml, document 1 (ReplicaAutoscaler ml/a) at {path}: " in text, text
    assert words in text, text


def test_dangling_target_names_the_namespace_and_its_deployments() -> None:
    text = error([deployment("chat", 1, namespace="ml"), deployment("embed", 1, namespace="ml"),
                  deployment("other", 1, namespace="prod"), replica_autoscaler("a", "other", namespace="ml")])
    assert ("team.yaml, document 3 (ReplicaAutoscaler ml/a) at spec.scaleTargetRef.name: ModelDeployment "
            "ml/other does not exist (deployments in namespace ml: chat, embed); name a ModelDeployment of the "
            "autoscaler's own namespace") in text


def test_two_autoscalers_on_one_deployment_is_an_error() -> None:
    text = error([deployment("chat", 1, namespace="ml"), replica_autoscaler("a", "chat", namespace="ml"),
                  replica_autoscaler("b", "chat", namespace="ml")])
    assert ("(ReplicaAutoscaler ml/b) at spec.scaleTargetRef.name: ModelDeployment ml/chat is already scaled by "
            "ReplicaAutoscaler ml/a (team.yaml#1); two autoscalers would fight over its replicas: keep one") in text
    assert text.startswith("1 problem in the manifests; nothing was applied:")


def test_duplicate_yaml_key_is_an_error() -> None:
    text = ("apiVersion: placement.modelplane-pulumi.dev/v1alpha1\nkind: ReplicaAutoscaler\n"
            "metadata: {name: a}\nspec:\n  scaleTargetRef: {name: chat}\n  maxReplicas: 4\n  maxReplicas: 40\n"
            "  metrics: [{type: QueueDepth, target: {averageValue: 4}}]\n")
    with pytest.raises(ManifestError) as exc:
        load_manifest_text(text, "team.yaml")
    assert "duplicate key 'maxReplicas'" in str(exc.value)


def test_served_only_in_our_group() -> None:
    doc = replica_autoscaler("a", "chat")
    doc["apiVersion"] = "modelplane.ai/v1alpha1"
    text = error([deployment("chat", 1), doc])
    assert f"ReplicaAutoscaler is served as '{BUDGET_API}', not 'modelplane.ai/v1alpha1'" in text
    doc["apiVersion"] = "autoscaling/v2"
    assert "FleetBudget and ReplicaAutoscaler) belong in the manifest directory" in error([deployment("chat", 1),
                                                                                           doc])


def test_missing_namespace_is_default_like_every_namespaced_kind() -> None:
    doc = replica_autoscaler("a", "chat")
    del doc["metadata"]["namespace"]
    fleet = load_manifest_text(to_yaml([deployment("chat", 1), doc]))
    assert list(fleet.autoscalers) == [("default", "a")]


def test_deeply_nested_or_huge_documents_are_refused_before_validation() -> None:
    doc = replica_autoscaler("a", "chat")
    nested: dict = {}
    cursor = nested
    for _ in range(200):
        cursor["x"] = {}
        cursor = cursor["x"]
    doc["spec"]["behavior"] = nested
    text = to_yaml([deployment("chat", 1), doc])
    with pytest.raises(ManifestError) as exc:
        load_manifest_text(text, "team.yaml")
    assert "nest" in str(exc.value) and "100" in str(exc.value)
