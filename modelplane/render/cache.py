"""ModelCache -> a shared PVC and the Job that stages the weights (semantics §5).

The Job stages into Hugging Face's cache layout (`--cache-dir`), not a plain directory,
because engines name the model by repo id and resolve it through `HF_HUB_CACHE`; the
revision is passed explicitly on both sides so the engine asks for exactly what was
staged.
"""

from __future__ import annotations

import shlex

from modelplane.api import Fleet, InferenceCluster, ModelCache
from modelplane.api.model_cache import HuggingFace
from modelplane.storage import cache_access_mode, cache_storage_class, cache_storage_problem

from .context import resolve_cluster
from .meta import (
    CACHE_MOUNT,
    DEFAULT_REVISION,
    LABEL_CLUSTER,
    LABEL_MANAGED_BY,
    LABEL_MODELCACHE,
    MANAGED_BY,
    Manifest,
    RenderError,
    metadata,
)
from .names import cache_job_name, cache_pvc_name, cache_secret_name

STAGING_IMAGE = "python:3.12-slim"
# `hf` exists since 0.34; `huggingface-cli` is a failing stub from 1.11 on.
HUB_REQUIREMENT = "huggingface_hub>=0.34,<2"


def hugging_face(cache: ModelCache) -> HuggingFace:
    """The cache's `huggingFace` block (the API requires it; a model built otherwise is refused)."""
    hf = cache.spec.hugging_face
    if hf is None:
        raise RenderError(f"ModelCache {cache.metadata.namespace}/{cache.metadata.name} has no spec.huggingFace")
    return hf


def cache_matches(cache: ModelCache, cluster: InferenceCluster) -> bool:
    selector = cache.spec.cluster_selector
    return selector is None or selector.matches(cluster.metadata.labels or {})


def cache_labels(cache: ModelCache, cluster: InferenceCluster) -> dict[str, str]:
    return {LABEL_MANAGED_BY: MANAGED_BY, LABEL_MODELCACHE: cache.metadata.name,
            LABEL_CLUSTER: cluster.metadata.name}


def staging_script(repo: str, revision: str) -> str:
    return "\n".join([
        "set -eu",
        f"pip install --no-cache-dir --quiet {shlex.quote(HUB_REQUIREMENT)}",
        f"hf download {shlex.quote(repo)} --revision {shlex.quote(revision)} --cache-dir {CACHE_MOUNT}",
    ])


def _pvc(cache: ModelCache, namespace: str, labels: dict[str, str], storage_class: str, access_mode: str) -> Manifest:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": metadata(cache_pvc_name(namespace, cache.metadata.name), labels, namespace),
        "spec": {
            "accessModes": [access_mode],
            "storageClassName": storage_class,
            "resources": {"requests": {"storage": f"{hugging_face(cache).size_gib}Gi"}},
        },
    }


def _job(cache: ModelCache, namespace: str, labels: dict[str, str]) -> Manifest:
    hf = hugging_face(cache)
    container: Manifest = {
        "name": "hydrate",
        "image": STAGING_IMAGE,
        "command": ["/bin/sh", "-c"],
        "args": [staging_script(hf.repo, hf.revision or DEFAULT_REVISION)],
    }
    if hf.auth_secret is not None:
        # Only the reference: the Secret itself is created by the program from its hfToken
        # secret, or by a GitOps user, so the token never appears in a rendered manifest.
        container["env"] = [{"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {
            "name": cache_secret_name(namespace, cache.metadata.name), "key": hf.auth_secret.key}}}]
    container["volumeMounts"] = [{"name": "model-cache", "mountPath": CACHE_MOUNT}]
    pvc = cache_pvc_name(namespace, cache.metadata.name)
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": metadata(cache_job_name(namespace, cache.metadata.name), labels, namespace),
        "spec": {
            "backoffLimit": 3,
            "template": {
                "metadata": {"labels": dict(sorted(labels.items()))},
                "spec": {
                    "restartPolicy": "OnFailure",
                    "containers": [container],
                    "volumes": [{"name": "model-cache", "persistentVolumeClaim": {"claimName": pvc}}],
                },
            },
        },
    }


def render_cache(fleet: Fleet, cache: ModelCache, cluster: InferenceCluster | str) -> list[Manifest]:
    """The PVC and staging Job of one cache on one cluster."""
    cluster = resolve_cluster(fleet, cluster)
    storage_class = cache_storage_class(cluster)
    namespace = cache.metadata.namespace or "default"
    if storage_class is None:
        raise RenderError(f"ModelCache {namespace}/{cache.metadata.name} cannot be staged on "
                          f"InferenceCluster {cluster.metadata.name}: {cache_storage_problem(cluster)}")
    labels = cache_labels(cache, cluster)
    pvc = _pvc(cache, namespace, labels, storage_class, cache_access_mode(cluster))
    return [pvc, _job(cache, namespace, labels)]
