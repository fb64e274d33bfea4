"""Schema checks: core and DRA kinds against the real Kubernetes OpenAPI (strict), CRD
kinds (LWS, Grove) against the field shapes in k8s-api-shapes.md §4 and §5.1, with every
embedded pod template or pod spec validated as core/v1 again."""

from __future__ import annotations

import re
from functools import cache

import jsonschema
import kubernetes_validate
from kubernetes_validate import utils
from referencing import Registry, Resource

K8S_VERSION = "1.35"
CORE_KINDS = {"Namespace", "ConfigMap", "Service", "PersistentVolumeClaim", "Job", "Deployment",
              "ResourceClaimTemplate", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding",
              "ResourceQuota", "DaemonSet", "StorageClass", "PodDisruptionBudget"}


@cache
def _validator(kind: str, api_version: str) -> jsonschema.Validator:
    """kubernetes-validate's strict schema for one kind, loaded once: its own `validate`
    re-reads the multi-megabyte definitions file on every call."""
    version = [v for v in utils.all_versions() if utils.major_minor(v) == K8S_VERSION][-1]
    folder = f"kubernetes-json-schema/v{version}-local-strict"
    group = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    schema = utils.schema_contents(f"{folder}/{kind.lower()}-{group}.json", K8S_VERSION)
    definitions = utils.schema_contents(f"{folder}/_definitions.json", K8S_VERSION)
    registry = Resource.from_contents(definitions) @ (Resource.from_contents(schema) @ Registry())
    return jsonschema.Draft202012Validator(schema, registry=registry)


def validate_core(obj: dict) -> None:
    error = jsonschema.exceptions.best_match(_validator(obj["kind"], obj["apiVersion"]).iter_errors(obj))
    if error is not None:
        path = "/".join(str(p) for p in error.absolute_path)
        raise AssertionError(f"{obj['kind']} {obj['metadata']['name']}: {path}: {error.message}")


def validate_with_library(obj: dict) -> None:
    """The library's own entry point, to show the cached path agrees with it."""
    kubernetes_validate.validate(obj, K8S_VERSION, strict=True)


def _pod_template(value, path):
    validate_core({"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "check"}, "template": value})
    return []


def _pod_spec(value, path):
    validate_core({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "check"}, "spec": value})
    return []


def _enum(*values):
    def check(value, path):
        return [] if value in values else [f"{path}: {value!r} not one of {values}"]
    return check


def _labels(value, path):
    ok = isinstance(value, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in value.items())
    return [] if ok else [f"{path}: expected a string map"]


# A key ending in "!" is required. A value is a type, a callable (value, path) -> errors,
# a nested shape dict, or a one-element list meaning "list of".
META = {"name!": str, "namespace": str, "labels": _labels, "annotations": _labels}

LWS = {
    "apiVersion!": _enum("leaderworkerset.x-k8s.io/v1"),
    "kind!": _enum("LeaderWorkerSet"),
    "metadata!": META,
    "spec!": {
        "replicas": int,
        "startupPolicy": _enum("LeaderCreated", "LeaderReady"),
        "networkConfig": {"subdomainPolicy": _enum("Shared", "UniquePerReplica")},
        "rolloutStrategy": {"type": _enum("RollingUpdate"), "rollingUpdateConfiguration": dict},
        "leaderWorkerTemplate!": {
            "size": int,
            "restartPolicy": _enum("RecreateGroupOnPodRestart", "RecreateGroupAfterStart", "None", "Default"),
            "leaderTemplate": _pod_template,
            "workerTemplate!": _pod_template,
            "subGroupPolicy": {"subGroupPolicyType": _enum("LeaderWorker", "LeaderExcluded"), "subGroupSize": int},
            "volumeClaimTemplates": [dict],
            "persistentVolumeClaimRetentionPolicy": dict,
        },
    },
}

CLIQUE = {
    "name!": str,
    "labels": _labels,
    "annotations": _labels,
    "spec!": {
        "roleName": str,
        "replicas!": int,
        "minAvailable": int,
        "startsAfter": [str],
        "autoScalingConfig": dict,
        "podSpec!": _pod_spec,
    },
}

PODCLIQUESET = {
    "apiVersion!": _enum("grove.io/v1alpha1"),
    "kind!": _enum("PodCliqueSet"),
    "metadata!": META,
    "spec!": {
        "replicas": int,
        "updateStrategy": {"type": _enum("RollingRecreate", "OnDelete")},
        "template!": {
            "cliqueStartupType": _enum("CliqueStartupTypeAnyOrder", "CliqueStartupTypeInOrder",
                                       "CliqueStartupTypeExplicit"),
            "priorityClassName": str,
            "headlessServiceConfig": {"publishNotReadyAddresses": bool},
            "terminationDelay": str,
            "topologyConstraint": dict,
            "resourceClaimTemplates": [dict],
            "resourceSharing": [dict],
            "cliques!": [CLIQUE],
            "podCliqueScalingGroups": [{
                "name!": str,
                "cliqueNames!": [str],
                "replicas": int,
                "minAvailable": int,
                "scaleConfig": dict,
            }],
        },
    },
}

_QUEUE_RESOURCE = {"quota": int, "overQuotaWeight": int, "limit": int}

# KAI Scheduler's Queue (k8s-api-shapes §5.2: spec.parentQueue, spec.priority,
# spec.resources.{cpu,memory,gpu}.{quota,overQuotaWeight,limit}).
KAI_QUEUE = {
    "apiVersion!": _enum("scheduling.run.ai/v2"),
    "kind!": _enum("Queue"),
    "metadata!": META,
    "spec!": {
        "parentQueue": str,
        "priority": int,
        "resources": {"cpu": _QUEUE_RESOURCE, "memory": _QUEUE_RESOURCE, "gpu": _QUEUE_RESOURCE},
    },
}

CRD_SHAPES = {"LeaderWorkerSet": LWS, "PodCliqueSet": PODCLIQUESET, "Queue": KAI_QUEUE}


def shape_errors(value, shape, path: str = "$") -> list[str]:
    if callable(shape) and not isinstance(shape, type):
        return shape(value, path)
    if isinstance(shape, type):
        ok = isinstance(value, shape) and not (shape is int and isinstance(value, bool))
        return [] if ok else [f"{path}: expected {shape.__name__}, got {type(value).__name__}"]
    if isinstance(shape, list):
        if not isinstance(value, list):
            return [f"{path}: expected a list"]
        return [e for i, item in enumerate(value) for e in shape_errors(item, shape[0], f"{path}[{i}]")]
    if not isinstance(value, dict):
        return [f"{path}: expected an object"]
    fields = {k.rstrip("!"): v for k, v in shape.items()}
    errors = [f"{path}.{k}: unknown field" for k in value if k not in fields]
    errors += [f"{path}.{k[:-1]}: required" for k in shape if k.endswith("!") and k[:-1] not in value]
    for key, sub in fields.items():
        if key in value:
            errors += shape_errors(value[key], sub, f"{path}.{key}")
    return errors


def validate_any(obj: dict) -> None:
    """Every rendered kind is checked one way or the other; an unknown kind fails."""
    if obj["kind"] in CORE_KINDS:
        validate_core(obj)
        return
    assert obj["kind"] in CRD_SHAPES, f"no schema for kind {obj['kind']}"
    errors = shape_errors(obj, CRD_SHAPES[obj["kind"]])
    assert not errors, "\n".join(errors)
