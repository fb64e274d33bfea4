"""A PodDisruptionBudget per engine workload (Deployment, LeaderWorkerSet or PodCliqueSet) whose
pods run on a pool a cluster-autoscaler resizes (modelplane.clouds.provisioning.autoscaled_pool).

The cluster-autoscaler removes a node whose utilisation (DRA devices included) stays under
`--scale-down-utilization-threshold`, 0.5 by default, by evicting its pods; it will not remove
one whose pods have a restrictive PodDisruptionBudget (kubernetes/autoscaler
cluster-autoscaler/FAQ.md, "What types of pods can prevent CA from removing a node?"). An
evicted gang member takes its whole gang down (LWS restarts the group), a replica's engine
copies were charged to exactly their nodes. So the budget admits no voluntary eviction:
`minAvailable` is every pod of the workload. An integer `minAvailable`, because the pods of
LeaderWorkerSet and Grove belong to controllers the disruption controller cannot scale
(kubernetes.io "Specifying a Disruption Budget for your Application": with arbitrary
controllers "only an integer value can be used with .spec.minAvailable"). Rendered only where
an autoscaler runs: elsewhere such a budget would only block node drains.
"""

from __future__ import annotations

from modelplane.api import Engine
from modelplane.clouds.provisioning import autoscaled_pool
from modelplane.vocabulary import LABEL_ENGINE, LABEL_WORKLOAD, Manifest

from .context import ReplicaContext
from .meta import metadata


def workload_pods(engine: Engine) -> int:
    """Pods of one engine workload: each copy runs one pod per member and worker node."""
    return engine.copies * sum(m.pods for m in engine.members)


def render_disruption_budget(r: ReplicaContext, engine: Engine, workload: str,
                             pools: tuple[str, ...]) -> Manifest | None:
    """The budget of one engine's workload named `workload`, whose members run on `pools`; None
    when no autoscaler resizes any of them."""
    if not any((pool := r.cluster.pool(p)) is not None and autoscaled_pool(r.cluster, pool) for p in pools):
        return None
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": metadata(workload, {**r.labels, LABEL_ENGINE: engine.name}, r.namespace),
        "spec": {"minAvailable": workload_pods(engine), "selector": {"matchLabels": {LABEL_WORKLOAD: workload}}},
    }
