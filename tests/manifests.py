"""The one place tests and benchmarks build manifests: terse builders for reference-style
documents (plain dicts). Output loads with `modelplane.api.load_documents` /
`load_manifest_text(to_yaml(docs))`. Test support, not part of the shipped package
(benchmarks import it as `tests.manifests`, with the repository root on sys.path)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import yaml

from modelplane.scheduler import FleetPlacement

API = "modelplane.ai/v1alpha1"
GPU_DRIVER = "gpu.nvidia.com"
# The fake GPU of the Kind, mock-engine and sim fleets: one per node.
FAKE_DRIVER = "gpu.example.com"


def mem_at_least(gib: int | str, driver: str = GPU_DRIVER) -> str:
    q = f"{gib}Gi" if isinstance(gib, int) else gib
    return f'device.capacity["{driver}"].memory.compareTo(quantity("{q}")) >= 0'


def device(name: str = "gpu", count: int = 1, memory: str = "80Gi", claim: str = "DRA",
           driver: str = GPU_DRIVER, attributes: dict | None = None) -> dict:
    d: dict[str, Any] = {"name": name, "driver": driver, "count": count, "claim": claim,
                         "capacity": {"memory": {"value": memory}}}
    if claim == "DRA":
        d["deviceClassName"] = driver
    if attributes:
        d["attributes"] = attributes
    return d


def inference_class(name: str, *devices: dict, description: str | None = None,
                    provisioning: dict[str, Any] | None = None) -> dict:
    spec: dict[str, Any] = {"devices": list(devices) or [device()]}
    if description is not None:
        spec["description"] = description
    if provisioning is not None:
        spec["provisioning"] = provisioning
    return {"apiVersion": API, "kind": "InferenceClass", "metadata": {"name": name}, "spec": spec}


def gpu_class(name: str, count: int = 1, memory: str = "80Gi") -> dict:
    return inference_class(name, device("gpu", count, memory))


def fake_gpu_class(attributes: dict | None = None, description: str | None = None) -> dict:
    """`fake-gpu`: one 80Gi device of FAKE_DRIVER per node."""
    return inference_class("fake-gpu", device("gpu", 1, "80Gi", driver=FAKE_DRIVER, attributes=attributes),
                           description=description)


def pool(name: str, class_name: str, nodes: int = 1, max_nodes: int | None = None,
         domain: str | None = None, *, fabric: str = "None", zones: list[str] | None = None) -> dict:
    p: dict[str, Any] = {"name": name, "className": class_name, "nodeCount": nodes}
    if max_nodes is not None:
        p["maxNodeCount"] = max_nodes
    if zones is not None:
        p["zones"] = zones
    if domain is not None or fabric != "None":
        p["fabric"] = {"type": fabric, "domain": domain} if domain is not None else {"type": fabric}
    return p


def gateway(cluster_name: str, traefik_version: str = "41.3.0", name: str = "default") -> dict[str, Any]:
    """The control-plane InferenceGateway, on fleet cluster `cluster_name`."""
    return {"apiVersion": API, "kind": "InferenceGateway", "metadata": {"name": name},
            "spec": {"backend": "Traefik", "traefik": {"version": traefik_version}, "clusterName": cluster_name}}


def kind_source(node_image: str | None = None) -> dict[str, Any]:
    return {"source": "Kind", "kind": {"nodeImage": node_image}} if node_image else {"source": "Kind"}


def cluster(name: str, *pools: dict, labels: dict | None = None,
            taints: list[dict] | None = None, source: dict[str, Any] | None = None,
            gateway_hostname: str | None = None) -> dict:
    spec: dict[str, Any] = {"cluster": source or kind_source(), "nodePools": list(pools)}
    if taints:
        spec["taints"] = taints
    if gateway_hostname is not None:
        spec["gateway"] = {"hostname": gateway_hostname}
    meta: dict[str, Any] = {"name": name}
    if labels:
        meta["labels"] = labels
    return {"apiVersion": API, "kind": "InferenceCluster", "metadata": meta, "spec": spec}


def taint(key: str, effect: str = "NoSchedule", value: str | None = None) -> dict:
    t = {"key": key, "effect": effect}
    if value is not None:
        t["value"] = value
    return t


def request(name: str = "gpu", count: int = 1, *cels: str) -> dict:
    return {"name": name, "count": count,
            "selectors": [{"cel": c} for c in (cels or (mem_at_least(40),))]}


def member(role: str = "Standalone", *requests: dict, nodes: int | None = None,
           image: str = "vllm/vllm-openai:v0.11.0", command: list[str] | None = None) -> dict:
    container: dict[str, Any] = {"name": "engine", "image": image}
    if command is not None:
        container["command"] = command
    m: dict[str, Any] = {"role": role, "template": {"spec": {"containers": [container]}}}
    if requests:
        m["nodeSelector"] = {"devices": list(requests)}
    if nodes is not None:
        m["worker"] = {"nodes": nodes}
    return m


def standalone(gpus: int = 1, min_gib: int | str = 40) -> dict:
    return member("Standalone", request("gpu", gpus, mem_at_least(min_gib)))


def engine(name: str = "main", *members: dict, copies: int = 1) -> dict:
    return {"name": name, "copies": copies, "members": list(members) or [standalone()]}


def deployment(name: str, replicas: int = 1, *engines: dict[str, Any], namespace: str = "default",
               selector: dict[str, str] | None = None, tolerations: list[dict[str, Any]] | None = None,
               cache: str | None = None, policy: dict[str, Any] | None = None,
               labels: dict[str, str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"engines": list(engines) or [engine()]}
    if selector:
        spec["clusterSelector"] = {"matchLabels": selector}
    if tolerations:
        spec["tolerations"] = tolerations
    if cache:
        spec["modelCacheRef"] = {"name": cache}
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if labels:
        meta["labels"] = labels
    top: dict[str, Any] = {"replicas": replicas, "template": {"spec": spec}}
    if policy is not None:
        top["placementPolicy"] = policy
    return {"apiVersion": API, "kind": "ModelDeployment", "metadata": meta, "spec": top}


# Our placement extensions (modelplane/api/placement_policy.py) ------------------------------

BUDGET_API = "placement.modelplane-pulumi.dev/v1alpha1"


def spread(key: str, min_groups: int | None = None, max_groups: int | None = None,
           per_group: int | None = None) -> dict[str, Any]:
    rule: dict[str, Any] = {"topologyKey": key}
    if min_groups is not None:
        rule["minGroups"] = min_groups
    if max_groups is not None:
        rule["maxGroups"] = max_groups
    if per_group is not None:
        rule["maxReplicasPerGroup"] = per_group
    return rule


def tier(name: str, **match_labels: str) -> dict[str, Any]:
    return {"name": name, "clusterSelector": {"matchLabels": dict(match_labels)}}


def preferences(*tiers: dict[str, Any], return_after: int | None = None,
                max_moves: int | None = None) -> dict[str, Any]:
    prefs: dict[str, Any] = {"tiers": list(tiers)}
    if return_after is not None:
        prefs["returnAfterPlans"] = return_after
    if max_moves is not None:
        prefs["maxMovesPerPlan"] = max_moves
    return prefs


def placement_policy(*spread_rules: dict[str, Any], prefs: dict[str, Any] | None = None) -> dict[str, Any]:
    block: dict[str, Any] = {}
    if spread_rules:
        block["spreadConstraints"] = list(spread_rules)
    if prefs is not None:
        block["clusterPreferences"] = prefs
    return block


def fleet_budget(name: str, max_devices: int, namespaces: list[str] | None = None,
                 selector: dict[str, str] | None = None, classes: list[str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"maxDevices": max_devices}
    if namespaces:
        spec["namespaces"] = namespaces
    if selector:
        spec["deploymentSelector"] = {"matchLabels": selector}
    if classes:
        spec["deviceClassNames"] = classes
    return {"apiVersion": BUDGET_API, "kind": "FleetBudget", "metadata": {"name": name}, "spec": spec}


def model_cache(name: str, namespace: str = "default", selector: dict[str, str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"source": "HuggingFace",
                            "huggingFace": {"repo": "Qwen/Qwen3-0.6B", "sizeGiB": 10}}
    if selector:
        spec["clusterSelector"] = {"matchLabels": selector}
    return {"apiVersion": API, "kind": "ModelCache",
            "metadata": {"name": name, "namespace": namespace}, "spec": spec}


def to_yaml(docs: list[dict]) -> str:
    return yaml.safe_dump_all(docs, sort_keys=False)


def service_entry(match_labels: dict[str, str], weighting: str | None = None, weight: int | None = None,
                  name: str | None = None) -> dict[str, Any]:
    entry: dict[str, Any] = {"selector": {"matchLabels": dict(match_labels)}}
    if name is not None:
        entry["name"] = name
    if weight is not None:
        entry["weight"] = weight
    if weighting is not None:
        entry["routingPolicy"] = {"weighting": weighting}
    return entry


def model_service(name: str, *entries: dict[str, Any], namespace: str = "default") -> dict[str, Any]:
    return {"apiVersion": API, "kind": "ModelService", "metadata": {"name": name, "namespace": namespace},
            "spec": {"endpoints": list(entries)}}


def previous_from(placement: FleetPlacement, not_ready: Iterable[str] = ()) -> FleetPlacement:
    """`placement` as the next plan reads it (`--previous`: through its JSON), with the
    named replicas marked `"ready": false`."""
    doc = json.loads(json.dumps(placement.to_json()))
    names = set(not_ready)
    for d in doc["deployments"]:
        for r in d["replicas"]:
            if r["name"] in names:
                r["ready"] = False
    return FleetPlacement.from_json(doc)


def replica_autoscaler(name: str, target: str, max_replicas: int = 4, *metrics: dict[str, Any],
                       min_replicas: int | None = None, behavior: dict[str, Any] | None = None,
                       namespace: str = "default") -> dict[str, Any]:
    """A ReplicaAutoscaler (ours, modelplane/api/replica_autoscaler.py); QueueDepth 4 by default."""
    spec: dict[str, Any] = {"scaleTargetRef": {"name": target}, "maxReplicas": max_replicas,
                            "metrics": list(metrics) or [metric("QueueDepth", 4)]}
    if min_replicas is not None:
        spec["minReplicas"] = min_replicas
    if behavior is not None:
        spec["behavior"] = behavior
    return {"apiVersion": BUDGET_API, "kind": "ReplicaAutoscaler",
            "metadata": {"name": name, "namespace": namespace}, "spec": spec}


def metric(type_: str, average: float, percentile: float | None = None) -> dict[str, Any]:
    m: dict[str, Any] = {"type": type_, "target": {"averageValue": average}}
    if percentile is not None:
        m["percentile"] = percentile
    return m
