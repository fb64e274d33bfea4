"""gang-zone-capacity: a multi-node gang copy runs in one zone (the renderers keep its pods
together, modelplane.clouds.nodes.gang_zone_affinity), so a copy that needs more nodes than any
one zone of its pool holds never schedules, although the pool as a whole is big enough."""

from __future__ import annotations

from collections.abc import Iterable
from math import ceil

from modelplane.clouds.zones import most_nodes_in_one_zone, pool_zones

from .context import CheckContext
from .findings import MANDATORY, Finding
from .registry import register

POLICY = "gang-zone-capacity"


@register(POLICY, MANDATORY, "A multi-node gang copy must fit in one zone of its pool", needs_placement=True)
def check(ctx: CheckContext) -> Iterable[Finding]:
    if ctx.placement is None:
        return
    seen: set[tuple[str, str, str, str]] = set()
    for placed in ctx.placement.deployments:
        dep = ctx.fleet.deployments.get((placed.namespace, placed.name))
        if dep is None:
            continue
        for replica in placed.replicas:
            cluster = ctx.fleet.clusters.get(replica.cluster)
            for e, engine in enumerate(dep.spec.template.spec.engines):
                where = replica.engines.get(engine.name)
                if cluster is None or where is None or len(engine.members) < 2:
                    continue
                pools = where.pools_for(len(engine.members))
                for pool_name in sorted(set(pools)):
                    pool = cluster.pool(pool_name)
                    limit = most_nodes_in_one_zone(cluster, pool) if pool is not None else None
                    klass = ctx.fleet.classes.get(pool.class_name or "") if pool is not None else None
                    if pool is None or limit is None or klass is None:
                        continue
                    per_node = sum(d.count for d in klass.spec.devices if d.claim == "DRA") or 1
                    devices = sum(q.count * member.pods for m, member in enumerate(engine.members)
                                  if pools[m] == pool_name and m < len(where.requests) for q in where.requests[m])
                    pods = sum(member.pods for m, member in enumerate(engine.members) if pools[m] == pool_name)
                    needed = max(ceil(devices / per_node), 1 if pods else 0)
                    key = (ctx.ref(dep), engine.name, cluster.metadata.name, pool_name)
                    if needed <= limit or key in seen:
                        continue
                    seen.add(key)
                    zones = pool_zones(cluster, pool)
                    yield Finding(
                        POLICY, MANDATORY, ctx.ref(dep), f"spec.template.spec.engines[{e}]",
                        f"one copy of engine {engine.name!r} needs {needed} node(s) of pool {pool_name!r} of "
                        f"InferenceCluster/{cluster.metadata.name}, and its pods must share a zone, but the pool's "
                        f"{pool.declared_nodes} node(s) spread over {len(zones)} zones ({', '.join(zones)}) hold at "
                        f"most {limit} in any one, so the copy never schedules. Fix: list one zone for the pool "
                        "(spec.nodePools[].zones), give it enough nodes per zone, or shrink the gang.")
