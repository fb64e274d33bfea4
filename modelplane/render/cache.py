"""ModelCache -> a shared PVC and the Job that stages the weights (semantics §5).

The Job stages into Hugging Face's cache layout (`--cache-dir`), not a plain directory,
because engines name the model by repo id and resolve it through `HF_HUB_CACHE`; the
revision is passed explicitly on both sides so the engine asks for exactly what was
staged.
"""

from __future__ import annotations

import shlex
from typing import Any

from .meta import (
    CACHE_MOUNT, DEFAULT_REVISION, LABEL_CLUSTER, LABEL_MANAGED_BY, LABEL_MODELCACHE, MANAGED_BY,
    RenderError, metadata,
)
from .names import cache_job_name, cache_pvc_name, cache_secret_name

STAGING_IMAGE = "python:3.12-slim"
# `hf` exists since 0.34; `huggingface-cli` is a failing stub from 1.11 on.
HUB_REQUIREMENT = "huggingface_hub>=0.34,<2"

# RWX StorageClasses the serving stack installs per source; Vultr has none, and an
# Existing cluster names its own.
STORAGE_CLASSES = {
    "EKS": "modelplane-rwx-efs",
    "GKE": "modelplane-rwx",
    "AKS": "modelplane-rwx-fs",
    "Nebius": "modelplane-rwx-fs",
    "Kind": "standard",
}


def cache_access_mode(cluster: Any) -> str:
    # Kind's `standard` class is rancher local-path, which refuses ReadWriteMany ("Only
    # support ReadWriteOnce access mode"). Node-local RWO still serves every pod on the
    # node the volume lands on, which is what a local Kind cluster has.
    return "ReadWriteOnce" if cluster.spec.cluster.source == "Kind" else "ReadWriteMany"


def cache_storage_class(cluster: Any) -> str | None:
    source = cluster.spec.cluster.source
    if source == "Existing":
        existing = cluster.spec.cluster.existing
        return existing.cache.storage_class_name if existing and existing.cache else None
    return STORAGE_CLASSES.get(source)


def cache_matches(cache: Any, cluster: Any) -> bool:
    selector = cache.spec.cluster_selector
    return selector is None or selector.matches(cluster.metadata.labels or {})


def cache_labels(cache: Any, cluster: Any) -> dict[str, str]:
    return {LABEL_MANAGED_BY: MANAGED_BY, LABEL_MODELCACHE: cache.metadata.name,
            LABEL_CLUSTER: cluster.metadata.name}


def staging_script(repo: str, revision: str) -> str:
    return "\n".join([
        "set -eu",
        f"pip install --no-cache-dir --quiet {shlex.quote(HUB_REQUIREMENT)}",
        f"hf download {shlex.quote(repo)} --revision {shlex.quote(revision)} --cache-dir {CACHE_MOUNT}",
    ])


def _pvc(cache: Any, namespace: str, labels: dict, storage_class: str, access_mode: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": metadata(cache_pvc_name(namespace, cache.metadata.name), labels, namespace),
        "spec": {
            "accessModes": [access_mode],
            "storageClassName": storage_class,
            "resources": {"requests": {"storage": f"{cache.spec.hugging_face.size_gib}Gi"}},
        },
    }


def _job(cache: Any, namespace: str, labels: dict) -> dict:
    hf = cache.spec.hugging_face
    container: dict = {
        "name": "hydrate",
        "image": STAGING_IMAGE,
        "command": ["/bin/sh", "-c"],
        "args": [staging_script(hf.repo, hf.revision or DEFAULT_REVISION)],
    }
    if hf.auth_secret is not None:
        # Only the reference: the Secret itself is copied to the workload cluster by the
        # program, so the token never appears in a rendered manifest.
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


def render_cache(fleet: Any, cache: Any, cluster: Any) -> list[dict]:
    """The PVC and staging Job of one cache on one cluster."""
    from .replica import resolve_cluster

    cluster = resolve_cluster(fleet, cluster)
    storage_class = cache_storage_class(cluster)
    namespace = cache.metadata.namespace or "default"
    if storage_class is None:
        hint = ("set spec.cluster.existing.cache.storageClassName to a ReadWriteMany StorageClass"
                if cluster.spec.cluster.source == "Existing"
                else f"{cluster.spec.cluster.source} clusters have no ReadWriteMany storage for caches")
        raise RenderError(f"ModelCache {namespace}/{cache.metadata.name} cannot be staged on "
                          f"InferenceCluster {cluster.metadata.name}: {hint}")
    labels = cache_labels(cache, cluster)
    pvc = _pvc(cache, namespace, labels, storage_class, cache_access_mode(cluster))
    return [pvc, _job(cache, namespace, labels)]
