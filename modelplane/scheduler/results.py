"""Stage `results`: every deployment's placement as the JSON and the reports show it —
its replicas (kept, placed, and set aside by a failover) by (cluster, index), its
conditions in `conditions.ORDER` (ReplicasScheduled here; Overdrawn and FailedOver from
their stages; the policies' from their plugins' `conditions` hooks), the `placementPolicy`
block from the `status` hooks, the unplaced replicas with their verdicts, and the
previous replicas not kept."""

from __future__ import annotations

from .conditions import in_order, replicas_scheduled
from .cycle import Cycle, DeploymentState
from .failover import ASIDE
from .placement_types import DeploymentPlacement
from .policy_types import PolicyStatus


def build(cycle: Cycle) -> None:
    cycle.result = [_placement(st) for st in cycle.deployments]


def _placement(st: DeploymentState) -> DeploymentPlacement:
    shape = st.shape
    aside = st.get(ASIDE)
    set_aside = aside.replicas if aside is not None else []
    serving = st.current
    conditions = [replicas_scheduled(st.desired, len(serving) - st.surge, st.candidates, shape.invalid),
                  *st.conditions]
    policy = PolicyStatus() if st.policy.active and not shape.invalid else None
    if not shape.invalid:
        for b in st.hooks["conditions"]:
            conditions += b.conditions()
        if policy is not None:
            for b in st.hooks["status"]:
                b.status(policy)
    replicas = sorted([*serving, *(r for r, _ in set_aside)], key=lambda r: (r.cluster, r.index))
    return DeploymentPlacement(shape.namespace, shape.name, st.desired, replicas, in_order(conditions),
                               st.unplaced, st.dropped, policy=policy, failover=[rec for _, rec in set_aside])
