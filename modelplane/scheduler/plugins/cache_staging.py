"""cache-staging: a deployment mounting a ModelCache runs only where the cache is staged:
clusters its `clusterSelector` matches (a true intersection with the deployment's own, not
the reference's dict merge) and that can hold its PVC (modelplane.storage, the rule the
renderer follows).

Its answer depends on the cache's selector and the cluster (its labels, and whether it can
hold a cache's PVC at all), not on which cache: deployments of different caches with one
selector share it (`key`), so the words name no cache (the deployment says which it mounts).
Keyed by the cache's name, the filter ran over every cluster once per cache, and every
filter key holding it was one more per-cluster pass of the fill and of feasibility."""

from __future__ import annotations

from typing import Self

from modelplane.scheduler.cycle import Binding, Cycle, DeploymentState
from modelplane.scheduler.reasons import CACHE_NOT_STAGEABLE, CACHE_SELECTOR_MISMATCH, NEVER, Reason
from modelplane.scheduler.shape import ClusterView, Labels

from .selectors import label_mismatch


class CacheStaging(Binding):
    name = "cache-staging"
    candidate = True

    def __init__(self, selector: Labels) -> None:
        self.selector = self.key = selector

    @classmethod
    def bind(cls, cycle: Cycle, st: DeploymentState) -> Self | None:  # noqa: ARG003 - the cycle is not needed
        shape = st.shape
        return cls(shape.cache_selector) if shape.cache_name else None

    def filter(self, cluster: ClusterView) -> Reason | None:
        miss = label_mismatch(cluster.labels, self.selector)
        if miss:
            return Reason(CACHE_SELECTOR_MISMATCH, self.name,
                          f"the ModelCache's clusterSelector does not match: {miss}", NEVER)
        if cluster.cache_problem:
            # The renderer could not draw the cache's PVC there: refuse here, with its reason.
            return Reason(CACHE_NOT_STAGEABLE, self.name,
                          f"a ModelCache cannot be staged on this cluster: {cluster.cache_problem}", NEVER)
        return None
