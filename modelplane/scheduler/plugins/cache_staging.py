"""cache-staging: a deployment mounting a ModelCache runs only where the cache is staged:
clusters its `clusterSelector` matches (a true intersection with the deployment's own, not
the reference's dict merge) and that can hold its PVC (modelplane.storage, the rule the
renderer follows)."""

from __future__ import annotations

from typing import Self

from modelplane.scheduler.cycle import Binding, Cycle, DeploymentState
from modelplane.scheduler.reasons import CACHE_NOT_STAGEABLE, CACHE_SELECTOR_MISMATCH, NEVER, Reason
from modelplane.scheduler.shape import ClusterView, Labels

from .selectors import label_mismatch


class CacheStaging(Binding):
    name = "cache-staging"
    candidate = True

    def __init__(self, cache: str, selector: Labels) -> None:
        self.cache, self.selector = cache, selector
        self.key = (cache, selector)            # the cache's name is part of the message

    @classmethod
    def bind(cls, cycle: Cycle, st: DeploymentState) -> Self | None:  # noqa: ARG003 - the cycle is not needed
        shape = st.shape
        return cls(shape.cache_name, shape.cache_selector) if shape.cache_name else None

    def filter(self, cluster: ClusterView) -> Reason | None:
        miss = label_mismatch(cluster.labels, self.selector)
        if miss:
            return Reason(CACHE_SELECTOR_MISMATCH, self.name,
                          f"ModelCache {self.cache} clusterSelector does not match: {miss}", NEVER)
        if cluster.cache_problem:
            # The renderer could not draw the cache's PVC there: refuse here, with its reason.
            return Reason(CACHE_NOT_STAGEABLE, self.name,
                          f"ModelCache {self.cache} cannot be staged on this cluster: {cluster.cache_problem}",
                          NEVER)
        return None
