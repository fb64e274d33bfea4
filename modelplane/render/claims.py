"""DRA ResourceClaimTemplates, one per claiming member (semantics §3.2, shapes §1.3).

The requests are the ones the scheduler resolved and recorded in the placement
(`EnginePlacement.requests`): renderers draw exactly what the fleet scheduler matched and
never run the matching themselves.
"""

from __future__ import annotations

from modelplane.api import Engine, Member
from modelplane.scheduler import ResolvedRequest
from modelplane.vocabulary import LABEL_ENGINE, Manifest

from .context import ReplicaContext
from .meta import RenderError, metadata
from .names import claim_template_name


def member_requests(r: ReplicaContext, engine: Engine, member_index: int, pool_name: str) -> list[ResolvedRequest]:
    """The requests the member resolved on its pool's class; empty for claimless members."""
    pool = r.cluster.pool(pool_name)
    if pool is None or not pool.class_name:
        raise RenderError(
            f"replica {r.name} of {r.namespace}/{r.deployment_name} is placed on pool "
            f"{pool_name!r}, which InferenceCluster {r.cluster_name} does not declare as a GPU pool"
        )
    placed = r.replica.engines[engine.name]
    if len(placed.requests) != len(engine.members):
        raise RenderError(
            f"replica {r.name} of {r.namespace}/{r.deployment_name}: the placement records no resolved "
            f"device requests for engine {engine.name!r} (a placement written before they were "
            "recorded); place the fleet again, which re-resolves every kept replica")
    requests = list(placed.requests[member_index])
    for q in requests:
        if not q.device_class_name:
            raise RenderError(f"replica {r.name}: request {q.name!r} of engine {engine.name!r} resolved "
                              "to a DRA device without a deviceClassName")
    return requests


def _request(q: ResolvedRequest) -> Manifest:
    exactly: Manifest = {"deviceClassName": q.device_class_name, "count": q.count}
    if selectors := tuple(q.selectors):
        # Copied verbatim so DRA re-checks at allocation what the fleet scheduler assumed.
        exactly["selectors"] = [{"cel": {"expression": s}} for s in selectors]
    return {"name": q.name, "exactly": exactly}


def render_claim_template(r: ReplicaContext, engine: Engine, member: Member,
                          requests: list[ResolvedRequest]) -> Manifest:
    name = claim_template_name(r.name, engine.name, member.role)
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": metadata(name, {**r.labels, LABEL_ENGINE: engine.name}, r.namespace),
        "spec": {"spec": {"devices": {"requests": [_request(q) for q in requests]}}},
    }
