"""fabric: a pool's fabric must exist where it is declared, and a multi-node gang on a
pool without one runs its tensor-parallel traffic over TCP (mission: silent failure 4;
modelplane-semantics.md §1.2, k8s-api-shapes.md §9)."""

from __future__ import annotations

from collections.abc import Iterable

from modelplane.api.model_deployment import Engine

from .context import CheckContext
from .findings import ADVISORY, MANDATORY, Finding
from .registry import register
from .tables import FABRIC_SOURCES

POLICY = "fabric"
POLICY_TCP = "fabric-multi-node-tcp"


@register(POLICY, MANDATORY, "Pool fabrics must be ones the cluster source can provide, with "
          "the settings they need")
def check(ctx: CheckContext) -> Iterable[Finding]:
    for cluster in ctx.fleet.clusters.values():
        source = cluster.spec.cluster.source
        for i, pool in enumerate(cluster.spec.node_pools):
            fabric = pool.fabric
            where = f"spec.nodePools[{i}].fabric"
            if fabric.type == "None":
                continue
            allowed = FABRIC_SOURCES.get(fabric.type, ())
            if source not in allowed:
                yield Finding(
                    POLICY, MANDATORY, ctx.ref(cluster), f"{where}.type",
                    f"pool {pool.name!r} declares fabric {fabric.type}, but the cluster's source is "
                    f"{source} and {fabric.type} is only available on {', '.join(allowed)} clusters: "
                    f"its nodes get no "
                    f"{fabric.type} interfaces and gangs placed here fall back to TCP. Fix: set "
                    f"fabric.type: None, or declare the pool on a cluster whose source is "
                    f"{' or '.join(s for s in allowed if s != 'Existing')}.",
                )
            elif fabric.type == "InfiniBand" and source == "Nebius" and fabric.infiniband is None:
                yield Finding(
                    POLICY, MANDATORY, ctx.ref(cluster), f"{where}.infiniband",
                    f"pool {pool.name!r} declares fabric InfiniBand on Nebius without "
                    f"fabric.infiniband.fabric: Nebius only joins nodes to an InfiniBand network "
                    f"through a GPU cluster bound to a named physical fabric, so the pool would be "
                    f"created without one. Fix: add fabric.infiniband.fabric naming the Nebius "
                    f"fabric of the region and platform (e.g. fabric-3).",
                )


def _worker(engine: Engine) -> tuple[int, int] | None:
    """(member index, nodes) of the engine's Worker when it spans several nodes."""
    for m, member in enumerate(engine.members):
        if member.role == "Worker" and member.pods > 0:
            return m, member.pods
    return None


@register(POLICY_TCP, ADVISORY, "A multi-node engine placed on a pool without an RDMA fabric "
          "runs tensor-parallel traffic over TCP", needs_placement=True)
def check_tcp(ctx: CheckContext) -> Iterable[Finding]:
    if ctx.placement is None:
        return
    seen: set[tuple[str, str, str, str, str]] = set()
    for placed in ctx.placement.deployments:
        dep = ctx.fleet.deployments.get((placed.namespace, placed.name))
        if dep is None:
            continue
        engines = dep.spec.template.spec.engines
        for replica in placed.replicas:
            cluster = ctx.fleet.clusters.get(replica.cluster)
            if cluster is None:
                continue
            for e, engine in enumerate(engines):
                worker = _worker(engine)
                where = replica.engines.get(engine.name)
                if worker is None or where is None:
                    continue
                m, nodes = worker
                for pool_name in sorted(set(where.pools_for(len(engine.members)))):
                    pool = cluster.pool(pool_name)
                    key = (placed.namespace, placed.name, engine.name, cluster.metadata.name, pool_name)
                    if pool is None or pool.fabric.type != "None" or key in seen:
                        continue
                    seen.add(key)
                    yield Finding(
                        POLICY_TCP, ADVISORY, ctx.ref(dep),
                        f"spec.template.spec.engines[{e}].members[{m}].worker.nodes",
                        f"engine {engine.name!r} spans a Leader and {nodes} Worker node(s), and replica "
                        f"{replica.name!r} is placed on pool {pool_name!r} of InferenceCluster/"
                        f"{cluster.metadata.name}, whose fabric is None: tensor-parallel traffic between "
                        f"its nodes will be capped by TCP. Fix: give that pool an RDMA fabric "
                        f"(spec.nodePools[].fabric.type EFA on EKS, InfiniBand on Nebius/AKS), steer the "
                        f"deployment to a pool that has one with clusterSelector, or fit the engine on "
                        f"one node.",
                    )
