"""Pod decoration shared by every member of every workload kind (semantics §3.2)."""

from __future__ import annotations

from modelplane.clouds.nodes import gang_zone_affinity
from modelplane.clouds.nvidia import GPU_TOLERATION
from modelplane.vocabulary import (
    LABEL_CLIQUE_ROLE,
    LABEL_ENGINE,
    LABEL_GROVE_SCALING_GROUP_INDEX,
    LABEL_LWS_GROUP_INDEX,
    LABEL_LWS_ROLE,
    LABEL_PD_ROLE,
    LABEL_POOL,
    LABEL_SERVING,
    LABEL_WORKLOAD,
    Manifest,
)

from .cache import wait_for_cache_container
from .context import MemberContext
from .engine import CACHE_VOLUME, DSHM_VOLUME, engine_container
from .meta import CLAIM_NAME, KAI_SCHEDULER
from .mock_engine_configmap import mock_engine_volume, ships_mock_engine
from .names import lws_name, podcliqueset_name, workload_name
from .pd_router import BOOTSTRAP_ANNOTATION, bootstrap_port, sglang_pd

# Provisioned GPU pools carry the GPU taint (modelplane.clouds.nvidia), and DRA pods (which
# never ask for the nvidia.com/gpu extended resource) do not get its toleration for free.


def workload_object_name(m: MemberContext) -> str:
    """The name of the Deployment, LeaderWorkerSet or PodCliqueSet that owns the pod."""
    if m.gang == "grove":
        return podcliqueset_name(m.replica.name, m.engine.name)
    if m.gang == "lws":
        return lws_name(m.replica.name, m.engine.name)
    return workload_name(m.replica.name, m.engine.name)


def pod_labels(m: MemberContext) -> dict[str, str]:
    r = m.replica
    managed = {
        **r.labels,
        LABEL_ENGINE: m.engine.name,
        LABEL_WORKLOAD: workload_object_name(m),
    }
    if m.serving:
        managed[LABEL_SERVING] = r.name
        if r.prefill_decode and m.engine.phase:
            managed[LABEL_PD_ROLE] = m.engine.phase.lower()
    if m.gang == "lws" and m.role == "Leader":
        managed[LABEL_LWS_ROLE] = "leader"
    if m.gang == "grove":
        managed[LABEL_CLIQUE_ROLE] = m.role.lower()
    user = dict(m.member.template.metadata.labels or {})
    return dict(sorted({**user, **managed}.items()))


def pod_annotations(m: MemberContext) -> dict[str, str]:
    notes = dict(m.member.template.metadata.annotations or {})
    if m.serving and m.engine.phase == "Prefill" and sglang_pd(m.replica):
        # The SGLang router reads a prefill pod's bootstrap port from this annotation.
        notes.setdefault(BOOTSTRAP_ANNOTATION, bootstrap_port(m.engine))
    return dict(sorted(notes.items()))


def pod_spec(m: MemberContext) -> Manifest:
    spec: Manifest = {}
    if m.gang == "grove":
        spec["schedulerName"] = KAI_SCHEDULER
    # The hard pin that makes the fleet scheduler's pool choice binding on the cluster.
    spec["nodeSelector"] = {LABEL_POOL: m.pool}
    if m.gang is not None:
        # One gang copy's pods in one zone, and the copies in the zones the plan charged for
        # them: NCCL across zones is slow, and a pool's placement group (EKS EFA) or compact
        # policy (GKE) is per zone.
        index_key = LABEL_GROVE_SCALING_GROUP_INDEX if m.gang == "grove" else LABEL_LWS_GROUP_INDEX
        zones = m.replica.replica.engines[m.engine.name].zones
        affinity = gang_zone_affinity(m.replica.cluster, LABEL_WORKLOAD, workload_object_name(m), index_key, zones)
        if affinity is not None:
            spec["affinity"] = affinity
    spec["tolerations"] = [dict(GPU_TOLERATION)]
    pull = m.member.template.spec.image_pull_secrets or []
    if pull:
        spec["imagePullSecrets"] = [{"name": s.name} for s in pull]
    if m.claim_template:
        spec["resourceClaims"] = [{"name": CLAIM_NAME, "resourceClaimTemplateName": m.claim_template}]
    if m.replica.cache is not None:
        # Hold the engine until its weights are staged, instead of crash-looping offline.
        spec["initContainers"] = [wait_for_cache_container(m.replica.cache, m.replica.namespace)]
    spec["containers"] = [engine_container(m)]
    volumes = [{"name": DSHM_VOLUME, "emptyDir": {"medium": "Memory"}}]
    if m.replica.cache_pvc:
        volumes.append({"name": CACHE_VOLUME, "persistentVolumeClaim": {"claimName": m.replica.cache_pvc}})
    if ships_mock_engine(m.replica.cluster):
        volumes.append(mock_engine_volume())
    spec["volumes"] = volumes
    return spec


def pod_template(m: MemberContext) -> Manifest:
    meta: Manifest = {"labels": pod_labels(m)}
    annotations = pod_annotations(m)
    if annotations:
        meta["annotations"] = annotations
    return {"metadata": meta, "spec": pod_spec(m)}
