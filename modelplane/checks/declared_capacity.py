"""declared-capacity: a pool's declared size that disagrees with the nodes the cluster
reports (mission: silent failure 7)."""

from __future__ import annotations

from collections.abc import Iterable

from .context import CheckContext
from .findings import ADVISORY, Finding
from .registry import register

POLICY = "declared-capacity"


@register(POLICY, ADVISORY, "Declared pool sizes should match the observed node counts")
def check(ctx: CheckContext) -> Iterable[Finding]:
    observed = ctx.observed or {}
    for cluster in ctx.fleet.clusters.values():
        seen = observed.get(cluster.metadata.name) or {}
        for i, pool in enumerate(cluster.spec.node_pools):
            if pool.name not in seen:
                continue
            nodes = int(seen[pool.name])
            label = f"{nodes} node(s) labelled modelplane.ai/pool={pool.name}"
            tail = ("The scheduler uses the observed count while the cluster is reachable and "
                    "falls back to the declared one when it is not")
            if pool.max_node_count:
                low = pool.min_node_count or 0
                if low <= nodes <= pool.max_node_count:
                    continue
                field, bound = (("maxNodeCount", pool.max_node_count) if nodes > pool.max_node_count
                                else ("minNodeCount", low))
                yield Finding(
                    POLICY, ADVISORY, ctx.ref(cluster), f"spec.nodePools[{i}].{field}",
                    f"pool {pool.name!r} autoscales {low}..{pool.max_node_count} but the cluster "
                    f"reports {label}, outside that range. {tail}. Fix: set {field}: {nodes}, or "
                    f"bring the pool back within {field} {bound}.",
                )
                continue
            declared = pool.node_count
            if nodes == declared:
                continue
            effect = (f"{declared - nodes} node(s) that do not exist, so replicas placed on them stay Pending"
                      if nodes < declared else
                      f"none of the {nodes - declared} extra node(s), which sit idle")
            yield Finding(
                POLICY, ADVISORY, ctx.ref(cluster), f"spec.nodePools[{i}].nodeCount",
                f"pool {pool.name!r} declares nodeCount {declared} but the cluster reports {label}. "
                f"{tail}, where it would count {effect}. Fix: set nodeCount: {nodes}, or restore the "
                f"pool to {declared} node(s).",
            )
