"""Readings from the engines' own /metrics, however they were fetched: through each cluster's
API server (the pod proxy, modelplane.autoscale.pod_metrics), from a Prometheus
(modelplane.autoscale.prometheus), or straight from local engines (the demo's loop).

    source = ScrapedMetricsSource(fleet, placement, {replica name: ReplicaMetrics})

Every replica the placement runs for the autoscaler's target counts: a replica the scrape
has nothing for (no pod yet, a pod not Ready) is not ready, so it is set aside on a scale-up
and never makes a scale-down; a ready replica whose metrics could not be read is missing
(HPA's missing pods). engines.replica_readings does the grouping. A replica on a cluster that
could not be read at all makes every metric of its deployment unreadable: it holds, with the
cluster's reason (a scale-down from the other clusters' numbers could remove replicas that
are serving at full load there).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from modelplane.api import Fleet
from modelplane.api.replica_autoscaler import ReplicaAutoscaler
from modelplane.autoscale.pod_metrics import ClusterMetrics, MetricsReading, PodScrape
from modelplane.limits import MAX_METRICS_PARSE_SECONDS
from modelplane.observe.read import NotRead, Unreachable
from modelplane.scheduler import FleetPlacement

from .engines import SERIES_NAMES, PodMetrics, ReplicaMetrics, engine_of, replica_readings
from .exposition import Buckets, Exposition, ExpositionError, buckets_of, parse
from .readings import Reading, Unreadable

NOT_SEEN = ReplicaMetrics(ready=False)


@dataclass(frozen=True)
class ScrapedMetricsSource:
    fleet: Fleet
    placement: FleetPlacement | None           # the replicas running now
    replicas: Mapping[str, ReplicaMetrics] = field(default_factory=dict)   # by replica name
    # Why nothing could be read for a cluster (unreachable, credentials refused): a reason
    # for each of its replicas, never a value.
    failed: Mapping[str, str] = field(default_factory=dict)

    def read(self, autoscaler: ReplicaAutoscaler, current: int, now: float) -> Mapping[str, Reading]:  # noqa: ARG002 - the protocol's; the placement says what runs
        key = autoscaler.target_key
        placed = self.placement.find(*key) if self.placement is not None else None
        replicas = list(placed.replicas) if placed is not None else []
        down = sorted({r.cluster for r in replicas if r.cluster in self.failed})
        if down:
            # Its replicas there may be serving at full load: holding is the only safe reading
            # (a missing replica at the target would still let the others scale it down).
            why = "; ".join(f"{c}: {self.failed[c]}" for c in down)
            return {m.type: Unreadable(f"the metrics of {key[0]}/{key[1]} on {', '.join(down)} could not be read "
                                       f"({why})") for m in autoscaler.spec.metrics}
        metrics = [self.replicas.get(r.name, NOT_SEEN) for r in replicas]
        return replica_readings(autoscaler, engine_of(self.fleet.deployments[key]), metrics, now)


def from_pods(placement: FleetPlacement | None, readings: Mapping[str, MetricsReading],
              budget: float = MAX_METRICS_PARSE_SECONDS, clock: Callable[[], float] = time.monotonic
              ) -> tuple[dict[str, ReplicaMetrics], dict[str, str]]:
    """What modelplane.autoscale.pod_metrics read, per placed replica (by name): ready when every
    serving pod of it that was listed is Ready (and one was), its pods' parsed /metrics (or
    why not) and the earlier read of each for the histograms' interval; and, per cluster that
    could not be read, why. Only the engines' series are parsed (engines.SERIES_NAMES), all
    the pods within `budget` seconds: a pod left unparsed by then is missing, saying so."""
    deadline = clock() + budget
    failed = {c: r.reason for c, r in readings.items() if isinstance(r, (Unreachable, NotRead))}
    by_key: dict[tuple[str, str, str, int], list[PodScrape]] = {}
    for reading in readings.values():
        if isinstance(reading, ClusterMetrics):
            for pod in reading.pods:
                k = pod.replica
                by_key.setdefault((k.namespace, k.deployment, k.cluster, k.index), []).append(pod)
    out: dict[str, ReplicaMetrics] = {}
    for dep in placement.deployments if placement is not None else []:
        for r in dep.replicas:
            pods = by_key.get((dep.namespace, dep.name, r.cluster, r.index), [])
            if not pods or not all(p.ready for p in pods):
                continue                                          # not ready (NOT_SEEN)
            metrics, previous = [], {}
            for i, pod in enumerate(pods):
                metrics.append(_parsed(pod, deadline, clock))
                if pod.before is not None:
                    with contextlib.suppress(ExpositionError):     # no interval then: the whole history
                        previous[i] = histograms(parse(pod.before, SERIES_NAMES, deadline, clock))
            out[r.name] = ReplicaMetrics(ready=True, pods=metrics, previous=previous)
    return out, failed


def _parsed(pod: PodScrape, deadline: float, clock: Callable[[], float]) -> PodMetrics:
    if pod.body is None:
        return PodMetrics(error=pod.error or "the pod's /metrics could not be read")
    try:
        return PodMetrics(parse(pod.body, SERIES_NAMES, deadline, clock))
    except ExpositionError as exc:
        return PodMetrics(error=str(exc))


def histograms(exposition: Exposition | None) -> dict[str, Buckets]:
    """Every histogram of one scrape, by name: the next scrape's `previous`, so a percentile
    covers the interval between the two."""
    if exposition is None:
        return {}
    out = {}
    for name, family in exposition.families.items():
        if family.type == "histogram":
            try:
                out[name] = buckets_of(family, name)
            except ExpositionError:
                continue
    return out


__all__ = ["ScrapedMetricsSource", "from_pods", "histograms"]
