"""When a replica a scale-in took out of the routes may be deleted: the one rule the placement
provider's pass applies (modelplane.reconcile_pass.stack_scaling, run by providers/autoscale.py)
and docs/autoscaling.md states.

What the last read says of a draining replica is one of:

* IDLE: its engines read nothing running or waiting;
* BUSY: one of them still has work;
* GONE: its cluster was read and lists no serving pod of it (nothing can be in flight);
* UNKNOWN: it could not be known this time (its /metrics unreadable, a pod not Ready, its
  cluster unreachable or not read): it waits, as BUSY does, until it reads idle or the grace
  period ends; unknown never counts as idle;
* UNOBSERVED: nothing can ever be known (the metrics come from a file, its cluster has no
  kubeconfig to read, or its deployment was removed): the drain time alone.

    drain_finished(out_for, drain_seconds, grace_seconds, activity)

is True once the replica has been out `grace_seconds` whatever it reads, or out `drain_seconds`
and IDLE, GONE or UNOBSERVED.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import Enum

from modelplane.api import Fleet
from modelplane.autoscale.pod_metrics import ClusterMetrics, MetricsReading

from .engines import ReplicaMetrics, replica_idle
from .state import Draining


class Activity(Enum):
    IDLE = "idle"
    BUSY = "busy"
    GONE = "gone"
    UNKNOWN = "unknown"
    UNOBSERVED = "unobserved"


_MAY_GO = frozenset({Activity.IDLE, Activity.GONE, Activity.UNOBSERVED})


def drain_finished(out_for: float, drain_seconds: float, grace_seconds: float, activity: Activity) -> bool:
    """Whether a replica out of the routes for `out_for` seconds may be deleted now."""
    if out_for >= grace_seconds:
        return True
    return out_for >= drain_seconds and activity in _MAY_GO


def drain_activity(fleet: Fleet, draining: Sequence[Draining], readings: Mapping[str, MetricsReading],
                   replicas: Mapping[str, ReplicaMetrics]) -> dict[str, Activity]:
    """What this pass read of each draining replica (by name): `readings` are the clusters'
    (modelplane.autoscale.pod_metrics.read_metrics, run over the placement with the draining replicas
    added), `replicas` what autoscale.scraped.from_pods made of them (the Ready ones)."""
    out: dict[str, Activity] = {}
    for d in draining:
        deployment = fleet.deployments.get((d.namespace, d.deployment))
        reading = readings.get(d.replica.cluster)
        if deployment is None or reading is None:
            out[d.replica.name] = Activity.UNOBSERVED
            continue
        if not isinstance(reading, ClusterMetrics):
            out[d.replica.name] = Activity.UNKNOWN        # unreachable, or its answers unusable
            continue
        pods = [p for p in reading.pods if (p.replica.namespace, p.replica.deployment, p.replica.cluster,
                                             p.replica.index) == (d.namespace, d.deployment, d.replica.cluster,
                                                                  d.replica.index)]
        if not pods:
            out[d.replica.name] = Activity.GONE
            continue
        idle = replica_idle(deployment, replicas.get(d.replica.name))
        out[d.replica.name] = Activity.UNKNOWN if idle is None else Activity.IDLE if idle else Activity.BUSY
    return out


__all__ = ["Activity", "drain_activity", "drain_finished"]
