"""One reconcile pass: observe -> decide -> place, and what a scale-in removes drains first.

    result = run(fleet, previous_json, now=time.time(), observation=..., scaling=...)

The one home of the pass that the placement resource's check() runs on every preview and up
(providers/, which only translates its props and maps errors to check failures),
`plan --observe` and `plan --metrics` (commands/plan.py), and the local demo's loop
(modelplane.runtime.scaling.LocalScaler, which reads its own engines):

1. **observe** (with an `Observation`: the clusters as read, by observe.read.read_clusters):
   the previous placement verified on them, observed capacity, cluster health and outages;
2. **decide** (with a `Scaling`: a fleet with ReplicaAutoscalers and where its metrics come
   from): a decision per autoscaler from the state kept between passes (autoscale.loop);
   `first_decision` is `plan --metrics`' one decision without history;
3. **place**: the scheduler at the decided counts, with the observed capacity and outages
   when observed (observe.place.place_observed), else place_fleet;
4. **drain**: a replica a scale-in removed stays, out of the routes, until `Scaling.drained`
   says it may go (autoscale.loop).

`stack_scaling` builds step 2's inputs from a stack's `autoscale` settings: a metrics file,
else the engines' /metrics through each cluster's API server or a Prometheus.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from modelplane.api import Fleet
from modelplane.autoscale.loop import scale_fleet
from modelplane.autoscale.readings import FileMetricsSource, MetricsSource, Unreadable, read_metrics_file
from modelplane.autoscale.scaled_placement import ScalingOutcome, decide_fleet, place_decisions
from modelplane.autoscale.state import Draining, ScalingState
from modelplane.json_types import JsonMapping, JsonObject
from modelplane.scheduler import DEFAULT_ACCOUNTING, FleetPlacement, place_fleet

if TYPE_CHECKING:   # the observer and the kube client load only for a pass that reads clusters
    from modelplane.api.replica_autoscaler import ReplicaAutoscaler
    from modelplane.observe.capacity import FleetCapacity
    from modelplane.observe.health import FailoverSettings, Health
    from modelplane.observe.read import Reading as ClusterReading

Counts = Mapping[str, Mapping[str, int]]


@dataclass(frozen=True)
class Observation:
    """The clusters as just read (observe.read.read_clusters), the health carried from the
    last pass, and when an outage turns into a failover (None: the defaults)."""

    readings: Mapping[str, ClusterReading]
    health: Health = field(default_factory=dict)
    failover: FailoverSettings | None = None


def _always(_: Draining) -> bool:
    return True


@dataclass(frozen=True)
class Scaling:
    """What the autoscalers decide from: the state of the last pass, the metrics, and when a
    replica out of the routes may be deleted."""

    state: ScalingState
    source: MetricsSource
    drained: Callable[[Draining], bool] = _always


@dataclass(frozen=True)
class Pass:
    """What one pass decided: the placement document, what was observed (with an Observation),
    and the autoscalers' outcomes, the state to keep and the replicas whose drain ended (with
    a Scaling)."""

    placement: JsonObject
    capacity: FleetCapacity | None = None
    health: Health | None = None
    outcomes: tuple[ScalingOutcome, ...] = ()
    state: ScalingState | None = None
    drained: tuple[Draining, ...] = ()
    typed_placement: FleetPlacement | None = None   # when the placement was made typed

    def typed(self) -> FleetPlacement:
        return self.typed_placement or FleetPlacement.from_json(self.placement)


def run(fleet: Fleet, previous: JsonMapping | None, *, now: float, accounting: str = DEFAULT_ACCOUNTING,
        counts: Counts | None = None, observation: Observation | None = None,
        scaling: Scaling | None = None) -> Pass:
    """One pass (the module docstring). `previous`: the last placement document or None;
    `counts`: declared node counts by hand (`--observed`, stack config), used where a pool was
    not read. Raises PlacementFormatError on a malformed previous document."""
    observed = []

    def place(target: Fleet, prev: JsonMapping | None) -> JsonObject:
        if observation is None:
            return place_fleet(target, FleetPlacement.from_json(prev) if prev else None, accounting,
                               {c: dict(p) for c, p in counts.items()} if counts else None).to_json()
        from modelplane.observe.place import place_observed

        plan = place_observed(target, prev or None, observation.readings, now=now, accounting=accounting,
                              counts=counts, health=observation.health, settings=observation.failover)
        observed.append(plan)
        return plan.placement

    if scaling is None:
        placement = place(fleet, previous)
        outcomes: tuple[ScalingOutcome, ...] = ()
        state: ScalingState | None = None
        drained: tuple[Draining, ...] = ()
    else:
        cycle = scale_fleet(fleet, scaling.state, scaling.source, now, dict(previous) if previous else None, place,
                            scaling.drained)
        placement, outcomes, state, drained = cycle.placement, cycle.outcomes, cycle.state, cycle.drained
    seen = observed[-1] if observed else None
    return Pass(placement, seen.capacity if seen else None, seen.health if seen else None, outcomes, state, drained)


def first_decision(fleet: Fleet, source: MetricsSource, previous: FleetPlacement | None, *, now: float,
                   accounting: str = DEFAULT_ACCOUNTING, counts: Counts | None = None) -> Pass:
    """`plan --metrics`: what the autoscalers would do at these numbers, a first decision
    (no history: stabilization applies from the second decision on, in `run`), placed at the
    decided counts; no cluster is read and nothing drains."""
    decisions = decide_fleet(fleet, source, now, previous)
    placement, outcomes = place_decisions(fleet, decisions, previous, accounting,
                                          dict(counts) if counts is not None else None)
    return Pass(placement.to_json(), outcomes=tuple(outcomes), typed_placement=placement)


def metrics_file_source(fleet: Fleet, path: str) -> FileMetricsSource:
    """A metrics file as a source, every entry checked against the fleet's autoscalers
    (ValueError naming the file and the fix)."""
    source = FileMetricsSource(read_metrics_file(path), f"metrics file {path}")
    source.check_against(fleet.autoscalers)
    return source


class _NoSource:
    """No metrics file and no cluster to read: every metric unreadable, saying why."""

    def read(self, autoscaler: ReplicaAutoscaler, current: int, now: float) -> JsonObject:  # noqa: ARG002 - the protocol's
        return {m.type: Unreadable("no metrics source: no cluster has a kubeconfig to read (stack config clusters."
                                   "<name>.kubeconfigPath, or the sim) and no autoscale.metricsFile is set")
                for m in autoscaler.spec.metrics}


def stack_scaling(fleet: Fleet, settings: JsonMapping, state: ScalingState, before: FleetPlacement | None,
                  kubeconfigs: Mapping[str, str] | None, contexts: Mapping[str, str], now: float) -> Scaling:
    """A stack's Scaling from its checked `autoscale` settings (providers/autoscale.py
    check_block): the metrics file if set; else, for every cluster with a kubeconfig, each
    Ready serving pod's /metrics through the API server's pod proxy, or the cluster's
    Prometheus; else no source. `before`: the previous placement (what runs now). A replica
    out of the routes is drained by modelplane.autoscale.drain's rule: `drainSeconds` after it
    left once its engines read nothing in flight (or its cluster lists no pod of it); a replica
    whose state cannot be read this time waits, up to `drainGraceSeconds`; where nothing can
    ever be known (a metrics file, no kubeconfig, a removed deployment) `drainSeconds` alone.
    ValueError naming what is wrong with the metrics."""
    # Deferred: the scrapers load only for a stack that reads its engines.
    from modelplane.autoscale.drain import Activity, drain_activity, drain_finished
    from modelplane.autoscale.pod_metrics import ClusterMetrics, read_metrics
    from modelplane.autoscale.prometheus import queries_for, with_bodies
    from modelplane.autoscale.scraped import ScrapedMetricsSource, from_pods

    source: MetricsSource
    activity: dict[str, Activity] = {}
    if settings["metricsFile"]:
        source = metrics_file_source(fleet, str(settings["metricsFile"]))
    elif kubeconfigs:
        prometheus = settings["prometheus"]
        queries = queries_for(fleet, settings["prometheusWindow"]) if prometheus else []
        uses_ttft = any(m.type == "TimeToFirstToken" for a in fleet.autoscalers.values() for m in a.spec.metrics)
        readings = read_metrics(kubeconfigs, {a.target_key for a in fleet.autoscalers.values()},
                                settings["timeout"], contexts,
                                window=settings["ttftWindow"] if uses_ttft else 0.0,
                                prometheus=prometheus, queries=[q.promql for q in queries])
        readings = {c: with_bodies(r, queries) if isinstance(r, ClusterMetrics) and c in prometheus
                    else r for c, r in readings.items()}
        running = state.with_draining(before) if before is not None else None
        replicas, failed = from_pods(running, readings)
        source = ScrapedMetricsSource(fleet, before, replicas, failed)
        activity = drain_activity(fleet, state.draining, readings, replicas)
    else:
        source = _NoSource()

    def drained(d: Draining) -> bool:
        # With a metrics file nothing in flight can be known: the drain time alone.
        return drain_finished(now - d.since, settings["drain"], settings["drainGrace"],
                              activity.get(d.replica.name, Activity.UNOBSERVED))

    return Scaling(state, source, drained)


__all__ = ["Observation", "Pass", "Scaling", "first_decision", "metrics_file_source", "run", "stack_scaling"]
