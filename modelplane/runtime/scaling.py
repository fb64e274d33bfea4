"""The autoscaling loop on a LocalFleet: engines and Traefik on 127.0.0.1 follow the load.

    scaler = LocalScaler(local, fleet)
    scaler.start()                  # the fleet at its declared counts, routed
    report = scaler.cycle()         # read, decide, place, apply, verify: one pass

Each pass (modelplane.reconcile_pass.run, the one the placement provider runs; this loop reads
its own engines and applies to its own processes):

1. **read**: every engine's `/metrics` on 127.0.0.1, all at once (`read_engines`), bounded in
   bytes and time (modelplane.autoscale.exposition.collect), its `/health` for readiness; each engine's
   histograms are kept for the next pass, so time to first token covers the interval;
2. **decide** each ReplicaAutoscaler and **place** the counts with the fleet scheduler;
3. **apply**: engines of new replicas start and answer before any route names them; the
   routes then change (workload gateways, then the control plane: LocalFleet.apply_routes),
   leaving replicas out of the control plane's routes at once and out of a workload
   gateway's once it has another replica of the service (modelplane.gateway.fleet.leaving_routes);
4. **drain**: a leaving replica's engine is stopped once a later pass reads it idle (no
   request running or waiting, after the routes without it were loaded) or `grace` seconds
   passed; stopping it is SIGTERM, on which the mock engine refuses new connections and
   finishes what is in flight. Nothing in flight is lost.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import httpx

from modelplane.api import Fleet, ModelDeployment
from modelplane.autoscale.conditions import SCALING_DISABLED
from modelplane.autoscale.engines import SERIES_NAMES, PodMetrics, ReplicaMetrics, replica_idle
from modelplane.autoscale.exposition import Buckets, ExpositionError, collect, parse
from modelplane.autoscale.scaled_placement import ScalingOutcome
from modelplane.autoscale.scraped import ScrapedMetricsSource, histograms
from modelplane.autoscale.state import Draining, ScalingState
from modelplane.gateway.config import ServiceRoute
from modelplane.gateway.fleet import leaving_routes, placement_endpoints
from modelplane.reconcile_pass import Scaling, run
from modelplane.routing import Endpoint
from modelplane.runtime.fleet import LocalFleet
from modelplane.scheduler import FleetPlacement, place_fleet

# The mock engine's flags a ModelDeployment's engine command may carry that shape its load.
ENGINE_FLAGS = ("--concurrency", "--delay-ms", "--stream-interval-ms")
SCRAPE_TIMEOUT_S = 2.0
MAX_PARALLEL_READS = 32     # threads reading engines at once (a demo fleet has a handful)
DEFAULT_GRACE_S = 30.0

PlacementJson = dict[str, object]


def engine_flags(deployment: ModelDeployment) -> list[str]:
    """The load-shaping mock engine flags of a deployment's first engine command
    (`--concurrency 2 --delay-ms 250`), so the local engine behaves as the manifest's does."""
    container = deployment.engines[0].members[0].template.spec.engine
    words = [*(container.command or []), *(container.args or [])]
    out: list[str] = []
    for i, word in enumerate(words):
        flag, eq, value = word.partition("=")
        if flag in ENGINE_FLAGS:
            given = value if eq else (words[i + 1] if i + 1 < len(words) else "")
            out += [flag, given]
    return out


@dataclass(frozen=True)
class PassReport:
    """What one pass did, for people and tests."""

    at: float
    counts: Mapping[tuple[str, str], int]                 # deployment -> replicas serving
    clusters: Mapping[tuple[str, str], Mapping[str, int]]  # deployment -> cluster -> replicas
    started: tuple[str, ...] = ()
    leaving: tuple[str, ...] = ()                          # replicas newly out of the routes
    stopped: tuple[str, ...] = ()                          # engines drained and stopped
    outcomes: tuple[ScalingOutcome, ...] = ()
    replicas: Mapping[tuple[str, str], tuple[str, ...]] = field(default_factory=dict)  # the routed ones
    draining: tuple[str, ...] = ()                         # every replica still draining

    def lines(self) -> list[str]:
        out = []
        for o in self.outcomes:
            d = o.decision
            if d.desired != d.current:
                out.append(f"  {o.target[0]}/{o.target[1]}: {d.current} -> {d.desired} replicas ({d.reason}): "
                           f"{d.message}")
        if self.started:
            out.append(f"  started {', '.join(self.started)}")
        if self.leaving:
            out.append(f"  out of the routes, draining: {', '.join(self.leaving)}")
        if self.stopped:
            out.append(f"  drained and stopped: {', '.join(self.stopped)}")
        return out

    def unsettled(self) -> list[str]:
        """Why a later pass would still change something if the load stayed as it is: a count
        held away from what the metrics ask for (a stabilization window, a rate limit, a
        metric that could not be read), a count the scheduler placed short, or replicas
        still draining. Empty when the loop is at rest."""
        out = []
        for o in self.outcomes:
            d, spec = o.decision, o.autoscaler.spec
            name = f"{o.target[0]}/{o.target[1]}"
            if d.desired != d.current:
                out.append(f"{name}: {d.current} -> {d.desired} replicas ({d.reason})")
            elif d.recommendation is None:
                if d.reason != SCALING_DISABLED:      # a parked deployment is at rest
                    out.append(f"{name}: holding at {d.current} ({d.reason})")
            elif d.desired != min(max(d.recommendation, spec.min_replicas), spec.max_replicas):
                out.append(f"{name}: holding at {d.desired} ({d.reason}); the metrics ask for {d.recommendation}")
            if o.placed != d.desired:
                out.append(f"{name}: {o.placed} of {d.desired} replicas placed")
        if self.draining:
            out.append(f"draining: {', '.join(self.draining)}")
        return out


@dataclass
class LocalScaler:
    local: LocalFleet
    fleet: Fleet
    grace: float = DEFAULT_GRACE_S
    clock: Callable[[], float] = time.time
    placement: PlacementJson | None = None
    state: ScalingState = field(default_factory=ScalingState)
    endpoints: list[Endpoint] = field(default_factory=list)
    # replica name -> its engine's histograms at the last scrape
    _previous: dict[str, dict[str, Buckets]] = field(default_factory=dict)
    _scraped: dict[str, ReplicaMetrics] = field(default_factory=dict)
    _routed: tuple[list[ServiceRoute], list[ServiceRoute]] | None = None

    def routes(self) -> list[ServiceRoute]:
        """The control plane's routes as last applied."""
        return list(self._routed[0]) if self._routed is not None else []

    def start(self) -> PassReport:
        """The fleet as declared: engines started, routes applied."""
        self.placement = place_fleet(self.fleet).to_json()
        started = self._apply(FleetPlacement.from_json(self.placement))
        return self._report((), started, (), ())

    # ------------------------------------------------------------------ one pass

    def cycle(self) -> PassReport:
        self._scraped = self._scrape()
        now = self.clock()
        before = FleetPlacement.from_json(self.placement) if self.placement else None
        source = ScrapedMetricsSource(self.fleet, before, self._scraped)
        leaving_before = {d.key for d in self.state.draining}
        result = run(self.fleet, self.placement, now=now,
                     scaling=Scaling(self.state, source, lambda d: self._drained(d, now)))
        assert result.state is not None, "a pass with a Scaling keeps a state"
        self.placement, self.state = result.placement, result.state
        started = self._apply(result.typed())
        for d in result.drained:
            if d.replica.name in self.local.engines:
                self.local.stop_engine(d.replica.name, self.grace)
            self._previous.pop(d.replica.name, None)
        leaving = tuple(sorted(d.replica.name for d in self.state.draining if d.key not in leaving_before))
        return self._report(result.outcomes, started, leaving, tuple(sorted(d.replica.name for d in result.drained)))

    def _drained(self, d: Draining, now: float) -> bool:
        """Idle at this pass's read, which came after the routes without it were loaded
        (they were applied by the pass that made it leave), or out of time."""
        if now - d.since >= self.grace:
            return True
        deployment = self.fleet.deployments.get((d.namespace, d.deployment))
        return d.since < now and deployment is not None and replica_idle(deployment,
                                                                          self._scraped.get(d.replica.name)) is True

    # ------------------------------------------------------------------ read

    def _scrape(self) -> dict[str, ReplicaMetrics]:
        alive = {name: engine.url for name, engine in list(self.local.engines.items()) if engine.alive()}
        reads = read_engines(alive)
        out: dict[str, ReplicaMetrics] = {}
        for name in self.local.engines:
            ready, pod = reads.get(name, (False, None))
            if pod is None:
                out[name] = ReplicaMetrics(ready=False)
                continue
            out[name] = ReplicaMetrics(ready, [pod], {0: self._previous.get(name, {})})
            self._previous[name] = histograms(pod.exposition)
        return out

    # ------------------------------------------------------------------ apply

    def _apply(self, placement: FleetPlacement) -> tuple[str, ...]:
        """Start the engines of new replicas (and wait for them), then route: the placed
        replicas serving, the draining ones leaving."""
        endpoints = placement_endpoints(self.fleet, self.state.with_draining(placement))
        fresh = [ep for ep in endpoints if not ep.external and ep.name not in self.local.engines]
        for ep in fresh:
            dep = self.fleet.deployments[(ep.namespace, ep.deployment or "")]
            self.local.start_engine(ep.name, ep.deployment, engine_flags(dep), wait=False)
        for ep in fresh:
            self.local.engines[ep.name].wait_ready()
        endpoints = self.local.start_engines(endpoints)
        serving, local = leaving_routes(self.fleet, endpoints, {d.key for d in self.state.draining})
        if (serving, local) != self._routed:
            # Only a change is written: every write is a reload of each Traefik.
            self.local.apply_routes(serving, endpoints, local)
            self._routed = (serving, local)
        self.endpoints = endpoints
        return tuple(sorted(ep.name for ep in fresh))

    def _report(self, outcomes: Sequence[ScalingOutcome], started: tuple[str, ...], leaving: tuple[str, ...],
                stopped: tuple[str, ...]) -> PassReport:
        placed = FleetPlacement.from_json(self.placement) if self.placement else FleetPlacement()
        counts = {(d.namespace, d.name): len(d.replicas) for d in placed.deployments}
        names = {(d.namespace, d.name): tuple(sorted(r.name for r in d.replicas)) for d in placed.deployments}
        clusters: dict[tuple[str, str], dict[str, int]] = {}
        for d in placed.deployments:
            for r in d.replicas:
                per = clusters.setdefault((d.namespace, d.name), {})
                per[r.cluster] = per.get(r.cluster, 0) + 1
        return PassReport(self.clock(), counts, clusters, started, leaving, stopped, tuple(outcomes), names,
                          tuple(sorted(d.replica.name for d in self.state.draining)))


def read_engines(urls: Mapping[str, str]) -> dict[str, tuple[bool, PodMetrics | None]]:
    """(ready, parsed /metrics) of every engine (name -> base URL), all read at once, each
    bounded by SCRAPE_TIMEOUT_S. At once because a pass's read is a snapshot of gauges: read
    one after the other, a client whose request ends on one replica and whose next begins on
    another between the two reads is counted on both, one client as two running requests.
    (An engine's gauge also counts a request until its handler returns, after the client has
    the answer: a pass may still read one client as two, more often under load.)"""
    if not urls:
        return {}
    names = list(urls)
    with httpx.Client(timeout=SCRAPE_TIMEOUT_S) as client, \
            ThreadPoolExecutor(max_workers=min(len(names), MAX_PARALLEL_READS),
                               thread_name_prefix="scrape") as pool:
        return dict(zip(names, pool.map(lambda name: _read(client, urls[name]), names), strict=True))


def _read(client: httpx.Client, url: str) -> tuple[bool, PodMetrics | None]:
    """(ready, the engine's parsed /metrics or why not), bounded in bytes and time."""
    try:
        ready = client.get(f"{url}/health").status_code == 200
        with client.stream("GET", f"{url}/metrics") as response:
            if response.status_code != 200:
                return ready, PodMetrics(error=f"/metrics answered HTTP {response.status_code}")
            body = collect(response.iter_bytes(), deadline=time.monotonic() + SCRAPE_TIMEOUT_S)
        return ready, PodMetrics(parse(body, SERIES_NAMES))
    except ExpositionError as exc:
        return False, PodMetrics(error=str(exc))
    except httpx.HTTPError as exc:
        return False, PodMetrics(error=f"/metrics could not be read ({type(exc).__name__})")


__all__ = ["DEFAULT_GRACE_S", "ENGINE_FLAGS", "LocalScaler", "PassReport", "engine_flags", "read_engines"]
