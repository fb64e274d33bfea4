"""Routers the simulator compares, all behind one interface: `choose(request, fleet, now, exclude)`
returns the replica a request goes to (None: no cluster left to try), and `refused(cluster, now,
status)` tells the router a cluster refused it (503 when lost, 429 when over its limit).

* `wrr`: today's path: a cluster by smooth weighted round robin over the ModelService's weights, a
  replica by round robin;
* `least-loaded`: the replica with the fewest requests (running + waiting) in the fleet;
* `prefix-hash`: a cluster by weighted rendezvous hashing of the prompt's first KEY_BLOCKS blocks
  (the reference project's proposal: cluster affinity by prefix), a replica by round robin;
* `oracle`: one exact global index: the replica, anywhere, with the least predicted time to first
  token (its backlog plus the prefill of what its cache lacks);
* `cache-aware` (ours): see CacheAware.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict, deque
from collections.abc import Callable, Iterable
from typing import Protocol

from modelplane.kvroute.engine import hit_tokens
from modelplane.kvroute.fleet import Cluster, FleetState, Replica
from modelplane.kvroute.summary import is_stale, mix64
from modelplane.kvroute.trace import TraceRequest

KEY_BLOCKS = 2          # a conversation's key: its first two blocks (the first is the shared system prompt)
SHARE_WINDOW = 5000     # requests over which a cluster's share is measured
SHARE_SLACK = 0.004     # a cluster is over its share past its weight + 0.4 percentage point
LOST_COOLDOWN_S = 10.0  # a cluster that refused a connection is tried again after this
BUSY_COOLDOWN_S = 1.0   # a cluster that answered 429 (its Retry-After)
LOAD_BOUND = 0.25       # a new prefix skips a cluster whose backlog is past (1 + this) x the mean...
LOAD_FLOOR_S = 0.5      # ... plus this (about one uncached prefill of the trace's mean prompt)


class Router(Protocol):
    name: str

    def choose(self, request: TraceRequest, fleet: FleetState, now: float, exclude: set[str]) -> Replica | None: ...

    def refused(self, cluster: str, now: float, status: int) -> None: ...


def prefix_key(request: TraceRequest) -> int:
    key = 0x51ED270B
    for b in request.blocks[:KEY_BLOCKS]:
        key = mix64(key ^ mix64(b))
    return key


def rendezvous(key: int, clusters: Iterable[Cluster], weight: Callable[[Cluster], float]) -> Cluster | None:
    """Weighted rendezvous hashing (Schindelhauer & Schomaker 2005, "logarithmic method"): the cluster
    with the highest -w / ln(u), u uniform in (0, 1) from (key, cluster). Over many keys a cluster gets
    w / sum(w) of them, and removing a cluster moves only its own keys."""
    best, best_score = None, -math.inf
    for c in clusters:
        if weight(c) <= 0:
            continue
        score = rendezvous_score(key, c, weight(c))
        if score > best_score:
            best, best_score = c, score
    return best


def rendezvous_score(key: int, cluster: Cluster, weight: float | None = None) -> float:
    w = cluster.weight if weight is None else weight
    u = (mix64(key ^ mix64(_name_hash(cluster.name))) >> 11) / float(1 << 53)
    return -w / math.log(u) if u > 0 else math.inf


_NAME_HASHES: dict[str, int] = {}


def _name_hash(name: str) -> int:
    h = _NAME_HASHES.get(name)
    if h is None:
        h = int.from_bytes(name.encode()[:64].ljust(8, b"\0")[:8], "little") ^ len(name)
        for ch in name.encode()[8:]:
            h = mix64(h ^ ch)
        h = _NAME_HASHES[name] = mix64(h)
    return h


class _RoundRobin:
    def __init__(self) -> None:
        self.next: Counter[str] = Counter()

    def replica(self, cluster: Cluster) -> Replica:
        i = self.next[cluster.name]
        self.next[cluster.name] = i + 1
        return cluster.replicas[i % len(cluster.replicas)]


class _Health:
    def __init__(self) -> None:
        self.down_until: dict[str, float] = {}

    def refused(self, cluster: str, now: float, status: int) -> None:
        self.down_until[cluster] = now + (BUSY_COOLDOWN_S if status == 429 else LOST_COOLDOWN_S)

    def usable(self, fleet: FleetState, now: float, exclude: set[str]) -> list[Cluster]:
        return [c for c in fleet.clusters if c.name not in exclude and self.down_until.get(c.name, -1.0) <= now
                and c.weight > 0]


class _Refusals:
    """What every router does with a refusal: keep the cluster out for its cooldown."""

    def __init__(self) -> None:
        self.health = _Health()

    def refused(self, cluster: str, now: float, status: int) -> None:
        self.health.refused(cluster, now, status)

    def usable(self, fleet: FleetState, now: float, exclude: set[str]) -> list[Cluster]:
        """Clusters not refusing; all those not excluded by the retry when every one is."""
        return self.health.usable(fleet, now, exclude) or [c for c in fleet.clusters if c.name not in exclude]


class WeightedRoundRobin(_Refusals):
    name = "wrr"

    def __init__(self) -> None:
        self.current: defaultdict[str, float] = defaultdict(float)
        self.rr = _RoundRobin()
        super().__init__()

    def choose(self, _request: TraceRequest, fleet: FleetState, now: float, exclude: set[str]) -> Replica | None:
        # nginx's smooth weighted round robin: each pick adds every weight, the largest wins and pays the total.
        usable = self.usable(fleet, now, exclude)
        if not usable:
            return None
        total = sum(c.weight for c in usable)
        for c in usable:
            self.current[c.name] += c.weight
        best = max(usable, key=lambda c: self.current[c.name])
        self.current[best.name] -= total
        return self.rr.replica(best)


class LeastLoaded(_Refusals):
    name = "least-loaded"

    def choose(self, _request: TraceRequest, fleet: FleetState, now: float, exclude: set[str]) -> Replica | None:
        usable = self.usable(fleet, now, exclude)
        replicas = [r for c in usable for r in c.replicas]
        return min(replicas, key=lambda r: (r.running + r.waiting, r.backlog_s)) if replicas else None


class PrefixHash(_Refusals):
    name = "prefix-hash"

    def __init__(self) -> None:
        self.rr = _RoundRobin()
        super().__init__()

    def choose(self, request: TraceRequest, fleet: FleetState, now: float, exclude: set[str]) -> Replica | None:
        usable = self.usable(fleet, now, exclude)
        best = rendezvous(prefix_key(request), usable, lambda c: c.weight)
        return self.rr.replica(best) if best else None


class Oracle(_Refusals):
    name = "oracle"

    def choose(self, request: TraceRequest, fleet: FleetState, now: float, exclude: set[str]) -> Replica | None:
        usable = self.usable(fleet, now, exclude)
        replicas = [r for c in usable for r in c.replicas]
        return min(replicas, key=lambda r: r.predicted_ttft(request)) if replicas else None


def best_replica(cluster: Cluster, request: TraceRequest) -> Replica:
    """The workload gateway's pick inside a cluster (llm-d's precise prefix scorer with its queue scorer,
    in one unit): the replica with the least predicted time to first token: its prefill backlog plus
    the prefill of the blocks its cache lacks (an exact index of the cluster's replicas, from their
    KV events). A prompt no replica holds any of goes, among the least predicted, to the replica holding
    fewer blocks (llm-d's KV-cache utilization scorer); any other tie to the first."""
    def score(r: Replica) -> tuple[float, int]:
        return r.predicted_ttft(request), (len(r.cache) if r.cache.prefix(request.blocks[:1]) == 0 else 0)
    return min(cluster.replicas, key=score)


class CacheAware:
    """Ours. Inside a cluster, `best_replica`. Across clusters, over the summaries the clusters publish:

    * a cluster's predicted time to first token = its published mean backlog (plus what this control
      plane sent it since that summary, per replica) + the prefill of the request's blocks its summary
      does not hold;
    * a prefix is KNOWN when some usable cluster holds more of it than every other does (the block all
      conversations share counts for none); it then goes to the known cluster with the least predicted
      time, unless every cluster holding it is over its share;
    * otherwise it is NEW and goes by weighted rendezvous hashing of its key (KEY_BLOCKS blocks) over the
      usable clusters' weights: over many prefixes each cluster gets its weight's share;
    * a cluster's share is measured over the last SHARE_WINDOW requests this router placed; a cluster is
      over its share past weight / total + SHARE_SLACK, and is then skipped (known and new alike) until
      it is not (the long window leaves a cluster holding a prefix free to take a burst of it; the
      slack, under a percentage point, keeps a 90/10 split within one point);
    * usable = weight > 0, not refusing (a 503 keeps it out LOST_COOLDOWN_S, a 429
      BUSY_COOLDOWN_S), not excluded by the caller's retry; a stale summary (older than MAX_AGE_S) counts
      as holding nothing.
    """

    name = "cache-aware"

    def __init__(self, share_window: int = SHARE_WINDOW, share_slack: float = SHARE_SLACK) -> None:
        self.health = _Health()
        self.window: deque[str] = deque()
        self.counts: Counter[str] = Counter()
        self.share_window = share_window
        self.share_slack = share_slack
        # Seconds of prefill sent to each cluster since its last summary.
        self.sent_since: defaultdict[str, float] = defaultdict(float)
        self.seen_seq: dict[str, int] = {}
        self.decisions: Counter[str] = Counter()    # known / new / spilled: why each request went where

    def refused(self, cluster: str, now: float, status: int) -> None:
        self.health.refused(cluster, now, status)
        if self.window and self.window[-1] == cluster:      # the placement did not happen
            self.counts[self.window.pop()] -= 1

    def over_share(self, cluster: Cluster, total_weight: float) -> bool:
        n = len(self.window)
        if n < 50:
            return False
        return self.counts[cluster.name] / n > cluster.weight / total_weight + self.share_slack

    def _record(self, cluster: str) -> None:
        self.window.append(cluster)
        self.counts[cluster] += 1
        if len(self.window) > self.share_window:
            self.counts[self.window.popleft()] -= 1

    def cluster_for(self, request: TraceRequest, fleet: FleetState, now: float, exclude: set[str]) -> Cluster | None:
        usable = self.health.usable(fleet, now, exclude)
        if not usable:
            usable = [c for c in fleet.clusters if c.name not in exclude and c.weight > 0]
            if not usable:
                return None
            self.decisions["spilled"] += 1
        total = sum(c.weight for c in usable)
        profile = fleet.profile
        held: dict[str, int] = {}
        work: dict[str, float] = {}
        load: dict[str, float] = {}
        predicted: dict[str, float] = {}
        for c in usable:
            s = fleet.summaries.get(c.name)
            if s is not None and s.seq != self.seen_seq.get(c.name):
                self.seen_seq[c.name] = s.seq
                self.sent_since[c.name] = 0.0
            fresh = s is not None and not is_stale(s, now)
            held[c.name] = s.prefix(request.blocks) if fresh and s is not None else 0
            hit = hit_tokens(held[c.name], request.input_tokens, profile.block_tokens)
            load[c.name] = (s.load_s if fresh and s is not None else 0.0) + self.sent_since[c.name] / len(c.replicas)
            work[c.name] = profile.prefill_seconds(request.input_tokens - hit)
            predicted[c.name] = load[c.name] + work[c.name]
        within = [c for c in usable if not self.over_share(c, total)] or usable
        common = min(held.values())
        known = [c for c in within if held[c.name] > common]
        if known:
            chosen = min(known, key=lambda c: (predicted[c.name], c.name))
            self.decisions["known"] += 1
        else:
            chosen = self._new(request, within, load)
            self.decisions["new"] += 1
        self.sent_since[chosen.name] += work[chosen.name]
        return chosen

    def _new(self, request: TraceRequest, within: list[Cluster], load: dict[str, float]) -> Cluster:
        """Weighted rendezvous with bounded loads (Mirrokni, Thorup, Zadimoghaddam 2018, over rendezvous
        instead of a ring): the first cluster of the key's ranking whose backlog is at most
        (1 + LOAD_BOUND) x the mean of those within their share, plus LOAD_FLOOR_S."""
        key = prefix_key(request)
        ranked = sorted(within, key=lambda c: -rendezvous_score(key, c))
        bound = (1 + LOAD_BOUND) * sum(load[c.name] for c in within) / len(within) + LOAD_FLOOR_S
        for c in ranked:
            if load[c.name] <= bound:
                return c
        return ranked[0]

    def choose(self, request: TraceRequest, fleet: FleetState, now: float, exclude: set[str]) -> Replica | None:
        cluster = self.cluster_for(request, fleet, now, exclude)
        if cluster is None:
            return None
        self._record(cluster.name)
        return best_replica(cluster, request)


ROUTERS: dict[str, Callable[[], Router]] = {
    "wrr": WeightedRoundRobin, "least-loaded": LeastLoaded, "prefix-hash": PrefixHash, "oracle": Oracle,
    "cache-aware": CacheAware,
}


__all__ = ["ROUTERS", "CacheAware", "LeastLoaded", "Oracle", "PrefixHash", "Router", "WeightedRoundRobin",
           "best_replica", "prefix_key", "rendezvous"]
