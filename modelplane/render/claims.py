"""DRA ResourceClaimTemplates, one per claiming member (semantics §3.2, shapes §1.3)."""

from __future__ import annotations

from typing import Any

from .context import ReplicaContext
from .meta import LABEL_ENGINE, RenderError, metadata
from .names import claim_template_name


def member_requests(r: ReplicaContext, engine: Any, member_index: int, pool_name: str) -> list:
    """The requests the member resolves on its pool's class; empty for claimless members."""
    from modelplane.scheduler import resolve_member_requests

    pool = r.cluster.pool(pool_name)
    if pool is None or not pool.class_name:
        raise RenderError(
            f"replica {r.name} of {r.namespace}/{r.deployment_name} is placed on pool "
            f"{pool_name!r}, which InferenceCluster {r.cluster_name} does not declare as a GPU pool"
        )
    try:
        found = resolve_member_requests(r.fleet, r.deployment, engine.name, member_index, pool.class_name)
    except KeyError as exc:
        raise RenderError(f"replica {r.name} of {r.namespace}/{r.deployment_name}: cannot resolve "
                          f"the device requests of engine {engine.name!r} on pool {pool_name!r}: {exc}") from exc
    requests = list(found)
    for q in requests:
        if not q.device_class_name:
            raise RenderError(f"replica {r.name}: request {q.name!r} of engine {engine.name!r} resolved "
                              "to a DRA device without a deviceClassName")
    return requests


def _request(q: Any) -> dict:
    exactly: dict = {"deviceClassName": q.device_class_name, "count": q.count}
    if selectors := tuple(q.selectors):
        # Copied verbatim so DRA re-checks at allocation what the fleet scheduler assumed.
        exactly["selectors"] = [{"cel": {"expression": s}} for s in selectors]
    return {"name": q.name, "exactly": exactly}


def render_claim_template(r: ReplicaContext, engine: Any, member: Any, requests: list) -> dict:
    name = claim_template_name(r.name, engine.name, member.role)
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": metadata(name, {**r.labels, LABEL_ENGINE: engine.name}, r.namespace),
        "spec": {"spec": {"devices": {"requests": [_request(q) for q in requests]}}},
    }
