"""One placed replica -> every manifest it needs on its workload cluster."""

from __future__ import annotations

from modelplane.api import Engine, Fleet, InferenceCluster, ModelDeployment
from modelplane.naming import claim_template_name
from modelplane.scheduler import PlacedReplica
from modelplane.storage import cache_storage_problem
from modelplane.vocabulary import Manifest

from .claims import is_efa, member_requests, render_claim_template, request_drivers
from .context import MemberContext, ReplicaContext, referenced_cache, resolve_cluster
from .deployment import render_deployment
from .disruption import render_disruption_budget
from .grove import render_podcliqueset
from .lws import render_lws
from .meta import RenderError
from .pd_router import render_pd_router
from .service import render_serving_service


def _member_pools(r: ReplicaContext, engine: Engine) -> tuple[str, ...]:
    placement = r.replica.engines.get(engine.name)
    if placement is None:
        raise RenderError(f"replica {r.name} of {r.namespace}/{r.deployment_name} has no placement "
                          f"for engine {engine.name!r}")
    pools = tuple(placement.member_pools) or (placement.pool,) * len(engine.members)
    if len(pools) != len(engine.members):
        raise RenderError(f"replica {r.name}: engine {engine.name!r} has {len(engine.members)} members "
                          f"but its placement names {len(pools)} pools")
    return pools


def _engine(r: ReplicaContext, engine: Engine) -> tuple[list[Manifest], Manifest]:
    pools = _member_pools(r, engine)
    standalone = len(engine.members) == 1
    gang = None if standalone else ("grove" if r.dynamo else "lws")
    claims: list[Manifest] = []
    members: dict[str, MemberContext] = {}
    for index, member in enumerate(engine.members):
        requests = member_requests(r, engine, index, pools[index])
        drivers = request_drivers(r, pools[index])
        template = None
        if requests:
            claims.append(render_claim_template(r, engine, member, requests, drivers))
            template = claim_template_name(r.name, engine.name, member.role)
        members[member.role] = MemberContext(
            replica=r, engine=engine, member=member, member_index=index, pool=pools[index],
            claim_template=template, gang=gang, serving=member.role in ("Standalone", "Leader"),
            claimed=sum(q.count for q in requests if not is_efa(q, drivers)))
    if standalone:
        return claims, render_deployment(members["Standalone"])
    render = render_podcliqueset if gang == "grove" else render_lws
    return claims, render(members["Leader"], members["Worker"])


def render_replica(fleet: Fleet, deployment: ModelDeployment, replica: PlacedReplica,
                   cluster: InferenceCluster | str) -> list[Manifest]:
    """Every Kubernetes object one placed replica needs, in apply order.

    Claim templates come before the workloads whose pods reference them; the serving
    Service comes last. The namespace is rendered once per cluster by the fleet renderer.
    """
    cluster = resolve_cluster(fleet, cluster)
    if replica.cluster != cluster.metadata.name:
        raise RenderError(f"replica {replica.name} is placed on {replica.cluster!r}, "
                          f"not on {cluster.metadata.name!r}")
    r = ReplicaContext(fleet, deployment, replica, cluster, referenced_cache(fleet, deployment))
    problem = cache_storage_problem(cluster) if r.cache is not None else None
    if r.cache is not None and problem:
        # The PVC can never exist there, so every pod would sit Pending on its volume. The
        # scheduler refuses such clusters with the same rule (modelplane.storage).
        raise RenderError(
            f"replica {r.name} of {r.namespace}/{r.deployment_name} is placed on InferenceCluster "
            f"{r.cluster_name}, which cannot stage ModelCache {r.cache.metadata.name}: {problem}"
        )
    claims: list[Manifest] = []
    workloads: list[Manifest] = []
    budgets: list[Manifest] = []
    for engine in deployment.spec.template.spec.engines:
        engine_claims, workload = _engine(r, engine)
        claims += engine_claims
        workloads.append(workload)
        budget = render_disruption_budget(r, engine, workload["metadata"]["name"], _member_pools(r, engine))
        budgets += [budget] if budget is not None else []
    router = render_pd_router(r)
    return claims + workloads + budgets + router + [render_serving_service(r)]
