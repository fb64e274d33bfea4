"""outages: a cluster that is unreachable, unready or still holding a replica failed over
from it takes no new replica (`ClusterView.outage`, from the `outages` input and the
previous placement: scheduler.failover). Replicas already there stay; the failover
stages decide whether they are set aside."""

from __future__ import annotations

from typing import Self

from modelplane.scheduler.cycle import Binding, Cycle, DeploymentState, Key
from modelplane.scheduler.reasons import CLUSTER_UNAVAILABLE, POLICY, Reason
from modelplane.scheduler.shape import ClusterView

ANY_CLOSED = Key[bool]("outages")


class Outages(Binding):
    name = "outages"
    policy_name = "cluster outage"

    @classmethod
    def bind(cls, cycle: Cycle, st: DeploymentState) -> Self | None:  # noqa: ARG003 - one answer for all
        closed = cycle.get(ANY_CLOSED)
        if closed is None:
            closed = cycle.put(ANY_CLOSED, any(c.outage for c in cycle.clusters.values()))
        return cls() if closed else None

    def filter(self, cluster: ClusterView) -> Reason | None:
        if cluster.outage:
            return Reason(CLUSTER_UNAVAILABLE, self.name, f"cluster unavailable: {cluster.outage}", POLICY)
        return None
