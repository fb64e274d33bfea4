"""The generated fleet of the scale benchmark, as manifest dicts and YAML files.

    fleet(clusters=1000, deployments=1000, replicas=10)   # the 1,000-cluster fleet
    fleet(clusters=100, deployments=100, replicas=10)     # the 100-cluster fleet
    write(docs, directory)                                # platform.yaml + models-*.yaml

What makes it realistic rather than uniform:
* clusters alternate EKS and GKE (classes with provisioning blocks for both), two
  regions and three tiers, two pools each (an 8-GPU and a 1-GPU class), a gateway
  hostname each (the GitOps path names workload gateways by it); every 50th cluster is
  drained (`NoSchedule`) and a few deployments tolerate it;
* deployments mix shapes: 1-GPU and 4-GPU Standalone engines and a Leader+Worker gang
  (8 + 2x8 GPUs); every 5th is pinned to a region; every other one mounts a ModelCache
  (one cache per team and model family, each staged on the clusters of one tier);
* one ModelService per pair of deployments of a team, 90/10 over the pair (a canary).

Pools are sized so the fleet holds `capacity` x the demand (default 1.25), at least one
gang per pool. Pure and deterministic: the same arguments give the same documents.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import yaml

API = "modelplane.ai/v1alpha1"
DRIVER = "gpu.nvidia.com"
TEAMS = 20             # namespaces, fewer on small fleets (deployments / 4)
FAMILIES = 2           # model families per team: deployments of one family share a cache
DRAIN_EVERY = 50       # every 50th cluster carries a NoSchedule drain taint
DRAIN_TAINT = "modelplane.ai/drain"

Doc = dict[str, Any]


def _class(name: str, provider: str, gpus: int) -> Doc:
    block: Doc = {"accelerator": {"type": "nvidia-h100-80gb", "count": gpus}}
    if provider == "EKS":
        block["instanceType"] = "p5.48xlarge" if gpus == 8 else "g6e.xlarge"
    else:
        block["machineType"] = "a3-highgpu-8g" if gpus == 8 else "a3-highgpu-1g"
    return {"apiVersion": API, "kind": "InferenceClass", "metadata": {"name": name}, "spec": {
        "provisioning": {"provider": provider, provider.lower(): block},
        "devices": [{"name": "gpu", "driver": DRIVER, "deviceClassName": DRIVER, "count": gpus,
                     "attributes": {"productName": {"string": "NVIDIA H100 80GB HBM3"}},
                     "capacity": {"memory": {"value": "81559Mi"}}}]}}


def _cluster(i: int, nodes: int) -> Doc:
    provider = "EKS" if i % 2 == 0 else "GKE"
    region = "us" if i % 4 < 2 else "eu"
    name = f"cluster-{i:04d}"
    spec: Doc = {
        "cluster": {"source": provider, provider.lower(): {"region": f"{region}-region-{i % 7}"}},
        "gateway": {"hostname": f"{name}.gateways.example.test"},
        "nodePools": [{"name": "h100x8", "className": f"{provider.lower()}-h100x8", "nodeCount": nodes},
                      {"name": "h100x1", "className": f"{provider.lower()}-h100x1", "nodeCount": nodes}],
    }
    if i % DRAIN_EVERY == DRAIN_EVERY - 1:
        spec["taints"] = [{"key": DRAIN_TAINT, "effect": "NoSchedule"}]
    return {"apiVersion": API, "kind": "InferenceCluster",
            "metadata": {"name": name, "labels": {"region": region, "tier": f"t{i % 3}"}}, "spec": spec}


def _request(gpus: int) -> Doc:
    return {"name": "gpu", "count": gpus, "selectors": [
        {"cel": f'device.capacity["{DRIVER}"].memory.compareTo(quantity("40Gi")) >= 0'}]}


def _member(role: str, gpus: int, nodes: int | None = None) -> Doc:
    member: Doc = {"role": role, "nodeSelector": {"devices": [_request(gpus)]},
                   "template": {"spec": {"containers": [{"name": "engine", "image": "vllm/vllm-openai:v0.11.0"}]}}}
    if nodes is not None:
        member["worker"] = {"nodes": nodes}
    return member


def shape(i: int) -> tuple[Doc, int]:
    """(engine, nodes one replica takes) for deployment i: 1-GPU, 1-GPU, 4-GPU, gang."""
    kind = i % 4
    if kind == 3:
        return {"name": "main", "members": [_member("Leader", 8), _member("Worker", 8, nodes=2)]}, 3
    return {"name": "main", "members": [_member("Standalone", 4 if kind == 2 else 1)]}, 1


def _namespace(i: int, teams: int) -> str:
    return f"team-{i % teams:02d}"


def _cache_name(i: int, teams: int) -> str:
    return f"family-{(i // teams) % FAMILIES}"


def _cache(namespace: str, name: str, tier: int) -> Doc:
    spec: Doc = {"source": "HuggingFace",
                 "huggingFace": {"repo": f"example/{name}", "revision": "0123456789abcdef0123456789abcdef01234567",
                                 "sizeGiB": 100}}
    spec["clusterSelector"] = {"matchLabels": {"tier": f"t{tier}"}}
    return {"apiVersion": API, "kind": "ModelCache", "metadata": {"name": name, "namespace": namespace}, "spec": spec}


def _deployment(i: int, replicas: int, teams: int) -> tuple[Doc, int]:
    engine, nodes = shape(i)
    spec: Doc = {"engines": [engine]}
    if i % 5 == 0:
        spec["clusterSelector"] = {"matchLabels": {"region": "eu" if i % 10 == 0 else "us"}}
    if i % 2 == 1:
        spec["modelCacheRef"] = {"name": _cache_name(i, teams)}
    if i % 25 == 0:
        spec["tolerations"] = [{"key": DRAIN_TAINT, "operator": "Exists", "effect": "NoSchedule"}]
    doc = {"apiVersion": API, "kind": "ModelDeployment",
           "metadata": {"name": f"model-{i:04d}", "namespace": _namespace(i, teams)},
           "spec": {"replicas": replicas, "template": {"spec": spec}}}
    return doc, nodes * replicas


def _service(i: int, teams: int) -> Doc:
    stable, canary = f"model-{i:04d}", f"model-{i + teams:04d}"
    entries = [{"name": "stable", "weight": 90, "selector": {"matchLabels": {"modelplane.ai/deployment": stable}}},
               {"name": "canary", "weight": 10, "selector": {"matchLabels": {"modelplane.ai/deployment": canary}}}]
    return {"apiVersion": API, "kind": "ModelService",
            "metadata": {"name": f"service-{i:04d}", "namespace": _namespace(i, teams)},
            "spec": {"endpoints": entries}}


def fleet(clusters: int, deployments: int, replicas: int = 10, capacity: float = 1.25) -> list[Doc]:
    """Every document of the fleet: classes, clusters, caches, deployments, services."""
    classes = [_class(f"{p.lower()}-h100x{g}", p, g) for p in ("EKS", "GKE") for g in (8, 1)]
    teams = max(1, min(TEAMS, deployments // 4))
    deps, demand = [], 0
    for i in range(deployments):
        doc, nodes = _deployment(i, replicas, teams)
        deps.append(doc)
        demand += nodes
    # pairs of deployments of one team share a service: (0, 20), (1, 21), ..., (40, 60)...
    services = [_service(i, teams) for i in range(deployments - teams) if (i // teams) % 2 == 0]
    used = sorted({(_namespace(i, teams), _cache_name(i, teams)) for i in range(deployments) if i % 2 == 1})
    caches = [_cache(ns, name, tier=n % 3) for n, (ns, name) in enumerate(used)]
    per_pool = max(3, math.ceil(demand * capacity / (clusters * 2)))
    return classes + [_cluster(i, per_pool) for i in range(clusters)] + caches + deps + services


def write(docs: list[Doc], directory: Path, per_file: int = 500) -> list[Path]:
    """platform.yaml (classes and clusters) and models-NNN.yaml (at most `per_file`
    documents each), as a team would keep them; returns the files written."""
    directory.mkdir(parents=True, exist_ok=True)
    platform = [d for d in docs if d["kind"] in ("InferenceClass", "InferenceCluster")]
    models = [d for d in docs if d["kind"] not in ("InferenceClass", "InferenceCluster")]
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    files = [directory / "platform.yaml"]
    files[0].write_text(yaml.dump_all(platform, Dumper=dumper, sort_keys=False))
    for start in range(0, len(models), per_file):
        path = directory / f"models-{start // per_file:03d}.yaml"
        path.write_text(yaml.dump_all(models[start:start + per_file], Dumper=dumper, sort_keys=False))
        files.append(path)
    return files
