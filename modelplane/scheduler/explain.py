"""Human-readable reasons a cluster cannot take a replica. Each function returns the
first reason found, in filter order, or None."""

from __future__ import annotations

from collections.abc import Mapping

from .shape import ClusterView, DeploymentShape
from .taints import repelling_taint


def _label_mismatch(labels: Mapping[str, str], selector: tuple[tuple[str, str], ...]) -> str | None:
    for key, value in selector:
        have = labels.get(key)
        if have != value:
            found = "missing" if have is None else f"{key}={have}"
            return f"needs {key}={value}, cluster has {found}"
    return None


def selector_reason(shape: DeploymentShape, cluster: ClusterView) -> str | None:
    miss = _label_mismatch(cluster.labels, shape.selector)
    if miss:
        return f"clusterSelector does not match: {miss}"
    miss = _label_mismatch(cluster.labels, shape.cache_selector)
    if miss:
        return f"ModelCache {shape.cache_name} clusterSelector does not match: {miss}"
    if shape.cache_name and cluster.cache_problem:
        # The renderer could not draw the cache's PVC there: refuse here, with its reason.
        return f"ModelCache {shape.cache_name} cannot be staged on this cluster: {cluster.cache_problem}"
    return None


def taint_reason(shape: DeploymentShape, cluster: ClusterView) -> str | None:
    taint = repelling_taint(cluster.taints, shape.tolerations)
    return f"untolerated taint {taint}" if taint else None


def outage_reason(cluster: ClusterView) -> str | None:
    return f"cluster unavailable: {cluster.outage}" if cluster.outage else None


def filter_reason(shape: DeploymentShape, cluster: ClusterView) -> str | None:
    return selector_reason(shape, cluster) or outage_reason(cluster) or taint_reason(shape, cluster)


def short_reason(engine: str, short: int, unit: str, pool: str) -> str:
    unit = unit if short != 1 else unit.rstrip("s")
    return f"engine {engine}: short by {short} {unit} in pool {pool}"


def no_pool_reason(engine: str, details: list[str]) -> str:
    if not details:
        return f"no pool for engine {engine}: the cluster publishes no pools"
    return f"no pool for engine {engine}: " + "; ".join(details)
