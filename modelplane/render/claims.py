"""DRA ResourceClaimTemplates, one per claiming member (semantics §3.2, shapes §1.3).

The requests are the ones the scheduler resolved and recorded in the placement
(`EnginePlacement.requests`): renderers draw exactly what the fleet scheduler matched and
never run the matching themselves.

A member claiming GPUs and DRANET EFA devices gets them in aligned groups: the GPU request is
split into one request per GPU (or per group of GPUs sharing an EFA), each paired with its
share of the EFA request under a `matchAttribute: resource.kubernetes.io/pcieRoot` constraint,
which both drivers publish, so each GPU talks through an EFA on its own PCIe root
(k8s-api-shapes.md §9.1; DRA v1 `DeviceConstraint.matchAttribute`: every device of the listed
requests must carry the attribute with one value, so one constraint over all eight GPUs could
never be met). Counts that do not divide are claimed unaligned. The grouping is
modelplane.clouds.pcie.efa_alignment; the scheduler refused every pool whose instance type
cannot hold it (the device-fit plugin, modelplane.scheduler.plugins.device_fit.alignment), so
what is rendered here can be allocated.
"""

from __future__ import annotations

from collections.abc import Mapping

from modelplane.api import Engine, Member
from modelplane.clouds.pcie import efa_alignment
from modelplane.naming import claim_template_name
from modelplane.scheduler import ResolvedRequest
from modelplane.vocabulary import ATTRIBUTE_PCIE_ROOT, DRANET_DRIVER, LABEL_ENGINE, Manifest

from .context import ReplicaContext
from .meta import RenderError, metadata


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


def is_efa(q: ResolvedRequest, drivers: Mapping[str, str]) -> bool:
    return drivers.get(q.device_class_name or "") == DRANET_DRIVER


def request_drivers(r: ReplicaContext, pool_name: str) -> dict[str, str]:
    """deviceClassName -> driver of the DRA devices the pool's class declares."""
    pool = r.cluster.pool(pool_name)
    klass = r.fleet.classes.get(pool.class_name or "") if pool is not None else None
    return {d.device_class_name or d.driver: d.driver for d in (klass.spec.devices if klass else [])
            if d.claim == "DRA"}


def _request(q: ResolvedRequest, name: str | None = None, count: int | None = None) -> Manifest:
    exactly: Manifest = {"deviceClassName": q.device_class_name, "count": q.count if count is None else count}
    if selectors := tuple(q.selectors):
        # Copied verbatim so DRA re-checks at allocation what the fleet scheduler assumed.
        exactly["selectors"] = [{"cel": {"expression": s}} for s in selectors]
    return {"name": name or q.name, "exactly": exactly}


def _indexed(name: str, i: int) -> str:
    suffix = f"-{i}"
    return name[: 63 - len(suffix)] + suffix


def device_requests(requests: list[ResolvedRequest], drivers: Mapping[str, str]) -> Manifest:
    """`spec.devices` of the claim: the requests, GPU and DRANET EFA ones in aligned pairs."""
    efa = [q for q in requests if is_efa(q, drivers)]
    others = [q for q in requests if q not in efa]
    if len(efa) != 1 or len(others) != 1:
        return {"requests": [_request(q) for q in requests]}
    gpu, nic = others[0], efa[0]
    alignment = efa_alignment([gpu.count], [nic.count])
    if alignment is None:     # neither count divides the other: no even pairing
        return {"requests": [_request(q) for q in requests]}
    out: list[Manifest] = []
    constraints: list[Manifest] = []
    for i in range(alignment.groups):
        g, e = _indexed(gpu.name, i), _indexed(nic.name, i)
        out += [_request(gpu, g, alignment.gpus), _request(nic, e, alignment.efas)]
        constraints.append({"requests": [g, e], "matchAttribute": ATTRIBUTE_PCIE_ROOT})
    return {"requests": out, "constraints": constraints}


def render_claim_template(r: ReplicaContext, engine: Engine, member: Member,
                          requests: list[ResolvedRequest], drivers: Mapping[str, str] | None = None) -> Manifest:
    name = claim_template_name(r.name, engine.name, member.role)
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": metadata(name, {**r.labels, LABEL_ENGINE: engine.name}, r.namespace),
        "spec": {"spec": {"devices": device_requests(requests, drivers or {})}},
    }
