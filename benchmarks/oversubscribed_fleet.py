"""An oversubscribed fleet: demand 1.3x capacity, with shapes that fit nowhere, somewhere
and everywhere, so most of a plan's work is refusing replicas and saying why.

    fleet(clusters=1000, deployments=1000)       # 10,000 replicas over 1,000 clusters
    scale_fleet.write(fleet(...), directory)     # as YAML files, for end-to-end runs

It is benchmarks/scale_fleet.py's fleet (EKS and GKE clusters with an 8-GPU and a 1-GPU
pool, two regions, three tiers, every 50th drained; deployments of 1-GPU, 4-GPU and gang
engines, some pinned to a region or mounting a cache staged on one tier) sized at
1/1.3 of the demand, with every 10th deployment asking for a shape no pool has:
* everywhere: 1-GPU Standalone engines (either pool);
* somewhere: 4-GPU engines and Leader+Worker gangs (8-GPU pools only), region pins and
  caches staged on one tier of clusters;
* nowhere: 16 GPUs on one node (every 10th deployment; no class has more than 8).
Pure and deterministic.
"""

from __future__ import annotations

import math
from typing import Any

import scale_fleet

OVERSUBSCRIBED = 1.3      # demand / capacity
NOWHERE_EVERY = 10


def fleet(clusters: int, deployments: int, replicas: int = 10) -> list[dict[str, Any]]:
    docs = scale_fleet.fleet(clusters, deployments, replicas)
    for doc in docs:
        if doc["kind"] != "ModelDeployment":
            continue
        i = int(doc["metadata"]["name"].rsplit("-", 1)[1])
        if i % NOWHERE_EVERY == NOWHERE_EVERY - 1:
            for member in doc["spec"]["template"]["spec"]["engines"][0]["members"]:
                for request in member["nodeSelector"]["devices"]:
                    request["count"] = 16
    # Pools hold demand / 1.3 nodes in all, spread evenly (sizes differ by at most one node,
    # at least a gang's 3), as scale_fleet sizes them for its own ratio.
    pools = [p for d in docs if d["kind"] == "InferenceCluster" for p in d["spec"]["nodePools"]]
    total = max(3 * len(pools), round(_demand(docs) / OVERSUBSCRIBED))
    for n, p in enumerate(pools):
        p["nodeCount"] = total // len(pools) + (1 if n < total % len(pools) else 0)
    return docs


def _demand(docs: list[dict[str, Any]]) -> int:
    """Nodes the deployments ask for, one per claiming pod (as scale_fleet counts them)."""
    demand = 0
    for d in docs:
        if d["kind"] == "ModelDeployment":
            members = d["spec"]["template"]["spec"]["engines"][0]["members"]
            demand += d["spec"]["replicas"] * sum(m.get("worker", {}).get("nodes", 1) for m in members)
    return demand


def demand_over_capacity(docs: list[dict[str, Any]]) -> float:
    nodes = sum(p["nodeCount"] for d in docs if d["kind"] == "InferenceCluster" for p in d["spec"]["nodePools"])
    return _demand(docs) / nodes if nodes else math.inf
