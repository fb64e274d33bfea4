"""The fleet the simulator runs and the routers see: clusters of replicas (modelplane.kvroute.engine's
model each), the ModelService weight of each cluster, and the summaries the control plane holds."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from modelplane.kvroute.engine import EngineProfile, KVCache, hit_tokens
from modelplane.kvroute.summary import PUBLISH_INTERVAL_S, CountingFilter, Summary, SummaryError, decode
from modelplane.kvroute.trace import TraceRequest


@dataclass(eq=False)
class Job:
    request: TraceRequest
    arrival_s: float
    estimate_s: float = 0.0          # the prefill time the replica expected when it took the request
    hit: int = 0
    attempts: int = 1


@dataclass(eq=False)
class Replica:
    name: str
    cluster: str
    profile: EngineProfile
    cache: KVCache
    queue: deque[Job] = field(default_factory=deque)
    prefilling: Job | None = None
    running: int = 0                 # in the batch: prefilling or decoding
    backlog_s: float = 0.0           # prefill time expected of the queue and the prefill running
    queries: int = 0                 # vllm:prefix_cache_queries (tokens)
    hits: int = 0                    # vllm:prefix_cache_hits (tokens)
    served: int = 0

    @property
    def waiting(self) -> int:
        return len(self.queue)

    def expected_hit(self, request: TraceRequest) -> int:
        return hit_tokens(self.cache.prefix(request.blocks), request.input_tokens, self.profile.block_tokens)

    def predicted_ttft(self, request: TraceRequest) -> float:
        """What this replica's first token would take: its backlog, then the prefill of what it lacks."""
        return self.backlog_s + self.profile.prefill_seconds(request.input_tokens - self.expected_hit(request))


@dataclass(eq=False)
class Cluster:
    name: str
    weight: float
    replicas: list[Replica]
    filter: CountingFilter
    seq: int = 0
    published_s: float = -1e18

    def summary(self, now_s: float) -> Summary:
        self.seq += 1
        self.published_s = now_s
        load = sum(r.backlog_s for r in self.replicas) / len(self.replicas)
        return Summary(self.name, self.seq, now_s, len(self.replicas), load, bytes(self.filter.bits))


def build_cluster(name: str, replicas: int, profile: EngineProfile, weight: float = 1.0) -> Cluster:
    filt = CountingFilter()
    members = [Replica(f"{name}-r{i}", name, profile, KVCache(profile.kv_capacity_blocks, filt.add, filt.remove))
               for i in range(replicas)]
    return Cluster(name, weight, members, filt)


class FleetState:
    """Clusters, and what the control plane knows of them: the last summary each published (read
    through modelplane.kvroute.summary.decode, as a real one would be) and which are refusing."""

    def __init__(self, clusters: list[Cluster], profile: EngineProfile,
                 publish_interval_s: float = PUBLISH_INTERVAL_S) -> None:
        if not clusters:
            raise ValueError("a fleet needs at least one cluster")
        self.clusters = clusters
        self.by_name = {c.name: c for c in clusters}
        self.profile = profile
        self.publish_interval_s = publish_interval_s
        self.summaries: dict[str, Summary] = {}
        self.summary_bytes = 0
        self.summaries_published = 0
        self.summaries_refused = 0
        self.silent: set[str] = set()          # clusters that publish nothing (lost)

    @property
    def replicas(self) -> list[Replica]:
        return [r for c in self.clusters for r in c.replicas]

    def publish_due(self, now_s: float) -> None:
        for c in self.clusters:
            if c.name in self.silent or now_s - c.published_s < self.publish_interval_s:
                continue
            self.receive(c.summary(now_s).encode(), now_s)

    def receive(self, data: bytes, now_s: float) -> Summary | None:
        """A summary as it arrives at the control plane: kept if it passes decode's checks."""
        self.summaries_published += 1
        self.summary_bytes += len(data)
        try:
            summary = decode(data, clusters=self.by_name, now_s=now_s,
                             last_seqs={name: s.seq for name, s in self.summaries.items()})
        except SummaryError:
            self.summaries_refused += 1
            return None
        self.summaries[summary.cluster] = summary
        return summary


__all__ = ["Cluster", "FleetState", "Job", "Replica", "build_cluster"]
