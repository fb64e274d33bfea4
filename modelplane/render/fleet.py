"""Everything the program applies, grouped per workload cluster, in a stable order."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from .cache import cache_matches, cache_storage_class, render_cache
from .meta import RenderError
from .mock_engine import render_mock_engine_configmap, ships_mock_engine
from .namespace import BUILTIN_NAMESPACES, render_namespace
from .replica import render_replica

# Dependencies first: a namespace before its contents, a PVC before the Job and the
# pods that mount it, claim templates before the pods that reference them.
KIND_ORDER = {
    "Namespace": 0,
    "ConfigMap": 1,
    "PersistentVolumeClaim": 1,
    "Job": 2,
    "ResourceClaimTemplate": 3,
    "Deployment": 4,
    "LeaderWorkerSet": 4,
    "PodCliqueSet": 4,
    "Service": 5,
}


def sort_key(obj: dict) -> tuple:
    meta = obj["metadata"]
    return (KIND_ORDER.get(obj["kind"], 9), obj["kind"], meta.get("namespace", ""), meta["name"])


def _cache_key(deployment: Any) -> tuple[str, str] | None:
    ref = deployment.spec.template.spec.model_cache_ref
    return None if ref is None else (deployment.metadata.namespace or "default", ref.name)


def render_cluster_manifests(fleet: Any, placement: Any) -> dict[str, list[dict]]:
    """cluster name -> its manifests; every fleet cluster has an entry, maybe empty."""
    out: dict[str, list[dict]] = {name: [] for name in sorted(fleet.clusters)}
    consumers: dict[tuple[str, str], set[str]] = defaultdict(set)
    for dp in placement.deployments:
        deployment = fleet.deployments.get((dp.namespace, dp.name))
        if deployment is None:
            raise RenderError(f"placement lists ModelDeployment {dp.namespace}/{dp.name}, "
                              "which is not in the fleet")
        for replica in dp.replicas:
            if replica.cluster not in out:
                raise RenderError(f"replica {replica.name} of {dp.namespace}/{dp.name} is placed on "
                                  f"unknown InferenceCluster {replica.cluster!r}")
            out[replica.cluster] += render_replica(fleet, deployment, replica, fleet.clusters[replica.cluster])
            if (key := _cache_key(deployment)) is not None:
                consumers[key].add(replica.cluster)
    for key, cache in sorted(fleet.caches.items()):
        matched = {name for name, cluster in fleet.clusters.items()
                   if cache_matches(cache, cluster) and cache_storage_class(cluster) is not None}
        # A replica kept on a cluster the selector no longer matches still mounts the
        # PVC; staging there too beats a pod stuck Pending on a missing claim.
        for name in sorted(matched | consumers.get(key, set())):
            out[name] += render_cache(fleet, cache, fleet.clusters[name])
    for name, objects in out.items():
        namespaces = {o["metadata"]["namespace"] for o in objects if "namespace" in o["metadata"]}
        objects += [render_namespace(ns, name) for ns in sorted(namespaces - BUILTIN_NAMESPACES)]
        if ships_mock_engine(fleet.clusters[name]):
            objects += [render_mock_engine_configmap(ns, name) for ns in sorted(namespaces)]
        objects.sort(key=sort_key)
    return out
