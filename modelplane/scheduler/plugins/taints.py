"""taints: a cluster with an untolerated `NoSchedule` or `NoExecute` taint takes no new
replica; an untolerated `NoExecute` also evicts the replicas it has (semantics §7, the
Kubernetes toleration rules in scheduler.taints). Removing a taint moves nothing back."""

from __future__ import annotations

from typing import Self

from modelplane.scheduler.cycle import Binding, Cycle, DeploymentState, Keeping
from modelplane.scheduler.reasons import EVICTED, POLICY, UNTOLERATED_TAINT, Reason
from modelplane.scheduler.shape import ClusterView, Toleration
from modelplane.scheduler.taints import evicting_taint, repelling_taint


class Taints(Binding):
    name = "taints"

    def __init__(self, tolerations: tuple[Toleration, ...]) -> None:
        self.tolerations = self.key = tolerations

    @classmethod
    def bind(cls, cycle: Cycle, st: DeploymentState) -> Self | None:  # noqa: ARG003 - the cycle is not needed
        return cls(st.shape.tolerations)

    def filter(self, cluster: ClusterView) -> Reason | None:
        taint = repelling_taint(cluster.taints, self.tolerations)
        return Reason(UNTOLERATED_TAINT, self.name, f"untolerated taint {taint}", POLICY) if taint else None

    def keep(self, kept: Keeping) -> Reason | None:
        taint = evicting_taint(kept.cluster.taints, self.tolerations)
        return Reason(EVICTED, self.name, f"evicted by untolerated taint {taint}") if taint else None
