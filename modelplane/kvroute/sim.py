"""A discrete-event simulator: a trace replayed over clusters x replicas of the engine model
(modelplane.kvroute.engine) with a pluggable router (modelplane.kvroute.routers). No sockets, no
clock: an event heap, so an hour of trace runs in seconds.

Faults: a `Fault(cluster, start_s, end_s, status)` makes the cluster refuse every request that
arrives in [start_s, end_s) (503: lost, and it publishes no summary meanwhile; 429: over its limit).
The fleet gateway then tries the next cluster its router gives (at most once each); a request is
failed only when every cluster refused it. Requests a cluster had already taken finish there (the
model has no crash of an engine mid-request)."""

from __future__ import annotations

import heapq
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from modelplane.json_types import JsonObject
from modelplane.kvroute.engine import EngineProfile, hit_tokens
from modelplane.kvroute.fleet import Cluster, FleetState, Job, Replica, build_cluster
from modelplane.kvroute.routers import ROUTERS, Router
from modelplane.kvroute.trace import TraceRequest

_PREFILL_END, _DECODE_END = 0, 1


@dataclass(frozen=True)
class Fault:
    cluster: str
    start_s: float
    end_s: float
    status: int = 503


@dataclass
class SimResult:
    router: str
    ttft_s: list[float] = field(default_factory=list)
    placements: list[tuple[str, str] | None] = field(default_factory=list)   # (cluster, replica) per request
    failed: int = 0
    retried: int = 0
    output_tokens: int = 0
    first_arrival_s: float = 0.0
    last_finish_s: float = 0.0
    queries: int = 0
    hits: int = 0
    summary_bytes: int = 0
    summaries: int = 0
    summaries_refused: int = 0
    clusters: int = 1
    duration_s: float = 0.0
    decisions: dict[str, int] = field(default_factory=dict)

    def percentile(self, q: float) -> float:
        """Nearest-rank percentile of the time to first token of the requests served."""
        values = sorted(self.ttft_s)
        if not values:
            return math.nan
        return values[min(len(values) - 1, max(0, math.ceil(q / 100.0 * len(values)) - 1))]

    @property
    def hit_rate(self) -> float:
        return self.hits / self.queries if self.queries else 0.0

    @property
    def throughput(self) -> float:
        """Output tokens a second, from the first arrival to the last completion."""
        span = self.last_finish_s - self.first_arrival_s
        return self.output_tokens / span if span > 0 else 0.0

    def shares(self, level: int = 0) -> dict[str, float]:
        placed = [p[level] for p in self.placements if p is not None]
        counts = Counter(placed)
        return {k: counts[k] / len(placed) for k in sorted(counts)} if placed else {}

    @property
    def summary_bytes_per_cluster_s(self) -> float:
        return self.summary_bytes / self.clusters / self.duration_s if self.duration_s > 0 else 0.0

    def to_json(self) -> JsonObject:
        return {
            "router": self.router, "requests": len(self.placements), "failed": self.failed, "retried": self.retried,
            "ttft_s": {"p50": self.percentile(50), "p90": self.percentile(90), "p99": self.percentile(99)},
            "throughput_output_tokens_per_s": self.throughput, "prefix_hit_rate": self.hit_rate,
            "prefix_cache_queries": self.queries, "prefix_cache_hits": self.hits,
            "cluster_shares": dict(self.shares(0)), "replica_shares": dict(self.shares(1)),
            "summary_bytes_per_cluster_per_s": self.summary_bytes_per_cluster_s,
            "summary_bytes_each": self.summary_bytes / self.summaries if self.summaries else 0.0,
            "summaries_refused": self.summaries_refused, "decisions": dict(self.decisions),
        }


def build_fleet(clusters: int, replicas: int, profile: EngineProfile,
                weights: Sequence[float] | None = None) -> FleetState:
    if not 1 <= clusters <= 1000 or not 1 <= replicas <= 1000:
        raise ValueError("a simulated fleet has 1..1000 clusters of 1..1000 replicas")
    if weights is not None and (len(weights) != clusters or any(not math.isfinite(w) or w < 0 for w in weights)
                                or not any(w > 0 for w in weights)):
        raise ValueError("weights: one finite, non-negative number per cluster, at least one positive")
    ws = list(weights) if weights is not None else [1.0] * clusters
    return FleetState([build_cluster(f"c{i}", replicas, profile, ws[i]) for i in range(clusters)], profile)


def simulate(trace: Sequence[TraceRequest], fleet: FleetState, router: Router | str, *,
             speedup: float = 1.0, faults: Sequence[Fault] = ()) -> SimResult:
    """Replay `trace` (arrivals divided by `speedup`) over `fleet`, each request placed by `router`."""
    if not (math.isfinite(speedup) and 0 < speedup <= 1e6):
        raise ValueError("speedup must be a positive finite number")
    chosen: Router = ROUTERS[router]() if isinstance(router, str) else router
    profile = fleet.profile
    result = SimResult(chosen.name, clusters=len(fleet.clusters))
    result.placements = [None] * len(trace)
    events: list[tuple[float, int, int, Replica, Job]] = []
    seq = 0

    def start_prefill(rep: Replica, now: float) -> None:
        nonlocal seq
        if rep.prefilling is not None or not rep.queue or rep.running >= profile.max_num_seqs:
            return
        job = rep.queue.popleft()
        req = job.request
        matched = rep.cache.prefix(req.blocks)
        hit = hit_tokens(matched, req.input_tokens, profile.block_tokens)
        rep.cache.touch(req.blocks)
        rep.queries += req.input_tokens
        rep.hits += hit
        job.hit = hit
        rep.prefilling = job
        rep.running += 1
        seq += 1
        heapq.heappush(events, (now + profile.prefill_seconds(req.input_tokens - hit), seq, _PREFILL_END, rep, job))

    def handle(ev: tuple[float, int, int, Replica, Job]) -> None:
        nonlocal seq
        now, _, kind, rep, job = ev
        if kind == _PREFILL_END:
            rep.prefilling = None
            rep.backlog_s = max(0.0, rep.backlog_s - job.estimate_s)
            result.ttft_s.append(now - job.arrival_s)
            seq += 1
            heapq.heappush(events, (now + job.request.output_tokens * profile.decode_s_per_token, seq, _DECODE_END,
                                    rep, job))
        else:
            rep.running -= 1
            rep.served += 1
            result.output_tokens += job.request.output_tokens
            result.last_finish_s = max(result.last_finish_s, now)
        start_prefill(rep, now)

    def refusing(cluster: str, now: float) -> int | None:
        for f in faults:
            if f.cluster == cluster and f.start_s <= now < f.end_s:
                return f.status
        return None

    names = {c.name for c in fleet.clusters}
    for f in faults:
        if f.cluster not in names:
            raise ValueError(f"fault: no cluster {f.cluster} in the fleet")
    result.first_arrival_s = trace[0].arrival_s / speedup if trace else 0.0
    for pos, req in enumerate(trace):
        now = req.arrival_s / speedup
        while events and events[0][0] <= now:
            handle(heapq.heappop(events))
        fleet.silent = {f.cluster for f in faults if f.status == 503 and f.start_s <= now < f.end_s}
        fleet.publish_due(now)
        exclude: set[str] = set()
        placed: Replica | None = None
        attempts = 0
        while placed is None and len(exclude) < len(fleet.clusters):
            rep = chosen.choose(req, fleet, now, exclude)
            if rep is None:
                break
            attempts += 1
            status = refusing(rep.cluster, now)
            if status is None:
                placed = rep
            else:
                chosen.refused(rep.cluster, now, status)
                exclude.add(rep.cluster)
        if placed is None:
            result.failed += 1
            continue
        if attempts > 1:
            result.retried += 1
        job = Job(req, now, attempts=attempts)
        job.estimate_s = profile.prefill_seconds(req.input_tokens - placed.expected_hit(req))
        placed.backlog_s += job.estimate_s
        placed.queue.append(job)
        result.placements[pos] = (placed.cluster, placed.name)
        start_prefill(placed, now)
    while events:
        handle(heapq.heappop(events))
    for rep in fleet.replicas:
        result.queries += rep.queries
        result.hits += rep.hits
    result.summary_bytes = fleet.summary_bytes
    result.summaries = fleet.summaries_published
    result.summaries_refused = fleet.summaries_refused
    result.duration_s = max(result.last_finish_s - result.first_arrival_s, 0.0)
    result.decisions = dict(getattr(chosen, "decisions", {}))
    return result


def run(trace: Sequence[TraceRequest], *, clusters: int, replicas: int, router: str, profile: EngineProfile,
        weights: Sequence[float] | None = None, speedup: float = 1.0, faults: Sequence[Fault] = ()) -> SimResult:
    """A fresh fleet, the trace replayed over it (each router starts from cold caches)."""
    trace = [TraceRequest(i, r.arrival_s, r.input_tokens, r.output_tokens, r.blocks) for i, r in enumerate(trace)]
    return simulate(trace, build_fleet(clusters, replicas, profile, weights), router, speedup=speedup, faults=faults)


__all__ = ["Cluster", "Fault", "SimResult", "build_fleet", "run", "simulate"]
