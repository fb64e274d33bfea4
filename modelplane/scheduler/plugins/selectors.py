"""selectors: a replica runs only on clusters whose labels hold every pair of the
deployment's `clusterSelector.matchLabels` (semantics §2.1; equality only, AND)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Self

from modelplane.scheduler.cycle import Binding, Cycle, DeploymentState
from modelplane.scheduler.reasons import NEVER, SELECTOR_MISMATCH, Reason
from modelplane.scheduler.shape import ClusterView, Labels


def label_mismatch(labels: Mapping[str, str], selector: Labels) -> str | None:
    """`needs k=v, cluster has k=w` for the first pair the labels miss, or None."""
    for key, value in selector:
        have = labels.get(key)
        if have != value:
            found = "missing" if have is None else f"{key}={have}"
            return f"needs {key}={value}, cluster has {found}"
    return None


class Selectors(Binding):
    name = "selectors"
    candidate = True

    def __init__(self, selector: Labels) -> None:
        self.selector = self.key = selector

    @classmethod
    def bind(cls, cycle: Cycle, st: DeploymentState) -> Self | None:  # noqa: ARG003 - the cycle is not needed
        return cls(st.shape.selector) if st.shape.selector else None

    def filter(self, cluster: ClusterView) -> Reason | None:
        miss = label_mismatch(cluster.labels, self.selector)
        return Reason(SELECTOR_MISMATCH, self.name, f"clusterSelector does not match: {miss}", NEVER) if miss else None
