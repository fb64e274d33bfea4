"""The three fleet-wide phases: retain (+ scale down), ledger, fill."""

from __future__ import annotations

import bisect
import heapq
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

from modelplane.naming import replica_name

from .explain import filter_reason, selector_reason
from .ledger import Ledger, Trial, Usage
from .matching import Matcher
from .placement import EngineOptions, demand_key, engine_options, place_replica, resolve_retained
from .shape import ClusterView, DeploymentShape, Labels, Signature, Toleration
from .taints import evicting_taint, repelling_taint
from .types import DeploymentPlacement, EnginePlacement, PlacedReplica, Unplaced


@dataclass
class Context:
    clusters: dict[str, ClusterView]           # sorted by name
    matcher: Matcher
    accounting: str
    # Memo tables, keyed by what each answer depends on (see the methods below).
    _candidates: dict[tuple[Labels, Labels, bool], list[ClusterView]] = field(default_factory=dict)
    _options: dict[tuple[DeploymentShape, Signature], list[EngineOptions]] = field(default_factory=dict)
    _open: dict[tuple[Labels, Labels, bool, tuple[Toleration, ...]], list[str]] = field(default_factory=dict)
    _filtered: dict[tuple[Labels, str | None, Labels, tuple[Toleration, ...]], dict[str, str]] = field(
        default_factory=dict)
    _demands: dict[tuple[DeploymentShape, Signature], tuple[object, ...]] = field(default_factory=dict)
    # (cluster, demand) pairs a cluster refused during fill. Fill only ever charges the
    # ledger, so a cluster that refused a demand refuses it for the rest of the pass:
    # later deployments of the same shape skip it without trying (issue 15: most of a
    # 1,000-cluster plan was such retries).
    refused: set[tuple[str, tuple[object, ...]]] = field(default_factory=set)

    def filter_reasons(self, shape: DeploymentShape) -> dict[str, str]:
        """Why each cluster is filtered out before any pool is looked at (selector,
        then taint); clusters that pass are absent."""
        # the cache's name is part of the message, so part of the key
        key = (shape.selector, shape.cache_name, shape.cache_selector, shape.tolerations)
        hit = self._filtered.get(key)
        if hit is None:
            hit = {}
            for name, cluster in self.clusters.items():
                why = filter_reason(shape, cluster)
                if why:
                    hit[name] = why
            self._filtered[key] = hit
        return hit

    def open_clusters(self, shape: DeploymentShape) -> list[str]:
        """Candidates that take new replicas of this deployment (no outage, no untolerated
        NoSchedule/NoExecute taint), by name."""
        key = (shape.selector, shape.cache_selector, bool(shape.cache_name), shape.tolerations)
        hit = self._open.get(key)
        if hit is None:
            hit = self._open[key] = [c.name for c in self.candidates(shape)
                                     if c.outage is None and repelling_taint(c.taints, shape.tolerations) is None]
        return hit

    def options(self, shape: DeploymentShape, cluster: ClusterView) -> list[EngineOptions]:
        """Capacity-free placement options of a deployment's engines on a cluster,
        shared by every cluster with the same pool signature."""
        key = (shape, cluster.signature)
        hit = self._options.get(key)
        if hit is None:
            hit = self._options[key] = [engine_options(self.matcher, e, cluster)
                                        for e in shape.engines]
        return hit

    def demand(self, shape: DeploymentShape, cluster: ClusterView) -> tuple[object, ...]:
        key = (shape, cluster.signature)
        hit = self._demands.get(key)
        if hit is None:
            hit = self._demands[key] = demand_key(self.options(shape, cluster))
        return hit

    def candidates(self, shape: DeploymentShape) -> list[ClusterView]:
        """Clusters both the deployment's and its cache's selectors match (a true
        intersection) and, when it uses a cache, that can stage it. Memoized per selector
        pair: deployments tend to share them."""
        key = (shape.selector, shape.cache_selector, bool(shape.cache_name))
        hit = self._candidates.get(key)
        if hit is None:
            hit = self._candidates[key] = [c for c in self.clusters.values()
                                           if selector_reason(shape, c) is None]
        return hit


@dataclass
class DeploymentState:
    shape: DeploymentShape
    retained: list[PlacedReplica] = field(default_factory=list)
    charges: dict[tuple[str, int], list[tuple[str, list[Usage]]]] = field(default_factory=dict)
    placed: list[PlacedReplica] = field(default_factory=list)
    unplaced: list[Unplaced] = field(default_factory=list)
    # (previous replica, why it is not kept): moved, dropped or scaled away
    dropped: list[tuple[PlacedReplica, str]] = field(default_factory=list)
    # kept replicas dropped because their pool could not hold them (see build_ledger)
    overdrawn: list[str] = field(default_factory=list)
    candidates: int = 0


def retain(ctx: Context, shape: DeploymentShape,
           previous: DeploymentPlacement | None) -> DeploymentState:
    st = DeploymentState(shape)
    if previous is None:
        return st
    if shape.invalid:
        # Can't re-resolve against an uncompilable spec: hold the replicas as they are
        # (never tear down infrastructure over an input error). They charge nothing.
        st.retained = sorted((_complete(shape, r) for r in previous.replicas),
                             key=lambda r: (r.cluster, r.index))
        return st
    seen: set[tuple[str, int]] = set()
    for rep in sorted(previous.replicas, key=lambda r: r.name):
        index = rep.index if isinstance(rep.index, int) and rep.index >= 0 else 0
        cluster = ctx.clusters.get(rep.cluster) if rep.cluster else None
        if cluster is None:
            st.dropped.append((rep, f"cluster {rep.cluster!r} is gone"))
            continue
        why = selector_reason(shape, cluster)
        if why:
            st.dropped.append((rep, why))
            continue
        ident = (cluster.name, index)
        if ident in seen:
            st.dropped.append((rep, f"duplicate of replica {cluster.name}#{index}"))
            continue
        taint = evicting_taint(cluster.taints, shape.tolerations)
        if taint:
            st.dropped.append((rep, f"evicted by untolerated taint {taint}"))
            continue
        engines, charges, why = resolve_retained(ctx.matcher, shape, cluster, rep.engines)
        if engines is None:
            st.dropped.append((rep, why or "no longer matches"))
            continue
        seen.add(ident)
        st.retained.append(PlacedReplica(replica_name(shape.name, cluster.name, index),
                                         index, cluster.name, engines))
        st.charges[ident] = charges
    return st


def _complete(shape: DeploymentShape, rep: PlacedReplica) -> PlacedReplica:
    """A held replica read from JSON without "members": spell its members' pools out."""
    engines = {}
    for name, placed in rep.engines.items():
        engine = shape.engine(name)
        if not placed.member_pools and engine is not None:
            placed = EnginePlacement(placed.pool, placed.pools_for(len(engine.members)), placed.requests)
        engines[name] = placed
    return PlacedReplica(rep.name, rep.index, rep.cluster, engines)


def scale_down(st: DeploymentState) -> None:
    if st.shape.invalid:
        return
    excess = len(st.retained) - st.shape.desired
    if excess <= 0:
        return
    # Most-loaded cluster first, ties to the later cluster name, then highest index: a
    # heap of clusters keyed (-load, -rank of the name), each with its replicas by index.
    # O(n log n): a previous placement of 20,000 replicas scales down in milliseconds.
    by_cluster: dict[str, list[PlacedReplica]] = {}
    for r in st.retained:
        by_cluster.setdefault(r.cluster, []).append(r)
    for reps in by_cluster.values():
        reps.sort(key=lambda r: r.index)
    names = sorted(by_cluster)
    heap = [(-len(by_cluster[c]), -rank, c) for rank, c in enumerate(names)]
    heapq.heapify(heap)
    victims: set[int] = set()
    for _ in range(excess):
        load, rank, cluster = heapq.heappop(heap)
        victim = by_cluster[cluster].pop()
        victims.add(id(victim))
        st.charges.pop((victim.cluster, victim.index), None)
        st.dropped.append((victim, "scaled down"))
        if load + 1 < 0:
            heapq.heappush(heap, (load + 1, rank, cluster))
    st.retained = [r for r in st.retained if id(r) not in victims]


def _empty_ledger(ctx: Context) -> Ledger:
    ledger = Ledger(ctx.accounting)
    for cluster in ctx.clusters.values():
        for pool in cluster.pools:
            ledger.add_pool((cluster.name, pool.name), pool.nodes,
                            tuple(d.count for d in pool.cls.devices), pool.free)
    return ledger


def _charged_ledger(ctx: Context, states: list[DeploymentState]) -> Ledger:
    ledger = _empty_ledger(ctx)
    # Every kept replica of every deployment, at its current spec's cost, gathered per
    # pool in (deployment, cluster, index) order: the order a fresh plan placed them.
    per_pool: dict[tuple[str, str], list[Usage]] = {}
    for st in states:
        for (cluster, _), charges in sorted(st.charges.items()):
            for pool, usages in charges:
                per_pool.setdefault((cluster, pool), []).extend(usages)
    ledger.charge_retained(per_pool)
    return ledger


def build_ledger(ctx: Context, states: list[DeploymentState]) -> Ledger:
    """Capacity left after every kept replica. A previous placement may keep more on a
    pool than it holds (it was written for more nodes, or by hand): then the replicas
    that do not fit are not kept (`_drop_overdraw`), so no plan ever renders more than
    fits, and fill places them again where there is room."""
    ledger = _charged_ledger(ctx, states)
    overdrawn = ledger.overdrawn()
    while overdrawn:
        _drop_overdraw(ctx, states, set(overdrawn))
        ledger = _charged_ledger(ctx, states)
        overdrawn = ledger.overdrawn()
    return ledger


def _drop_overdraw(ctx: Context, states: list[DeploymentState], pools: set[tuple[str, str]]) -> None:
    """On each overdrawn pool, keep the kept replicas that fit one at a time in
    (deployment, cluster, index) order, as a fresh plan would place them; drop the rest
    (a replica fits only if all its charges on overdrawn pools fit)."""
    probe = _empty_ledger(ctx)
    unit = "nodes" if ctx.accounting == "Node" else "devices"
    for st in states:
        for ident, charges in sorted(st.charges.items()):
            cluster = ident[0]
            trial = Trial(probe)
            short: tuple[int, str] | None = None
            for pool, usages in charges:
                if (cluster, pool) in pools:
                    missing = trial.state((cluster, pool)).try_take(usages)
                    if missing and short is None:
                        short = (missing, pool)
            if short is None:
                trial.commit()
                continue
            rep = next(r for r in st.retained if (r.cluster, r.index) == ident)
            st.retained.remove(rep)
            del st.charges[ident]
            amount = f"{short[0]} {unit if short[0] != 1 else unit.rstrip('s')}"
            st.dropped.append((rep, f"pool {short[1]} of cluster {cluster} holds less than the previous "
                                    f"placement kept there (short by {amount}): not kept, placed again "
                                    "where it fits"))
            st.overdrawn.append(f"{rep.name} ({cluster}#{rep.index}, pool {short[1]}, short by {amount})")


def fill(ctx: Context, st: DeploymentState, ledger: Ledger) -> None:
    """Add the missing replicas one at a time: filter clusters, score them by spread,
    reserve capacity on the best one that takes the replica."""
    shape = st.shape
    if shape.invalid:
        return
    st.candidates = len(ctx.candidates(shape))
    missing = shape.desired - len(st.retained)
    if missing <= 0:
        return
    queue = SpreadQueue(filter_clusters(ctx, shape), st.retained)
    used: dict[str, set[int]] = {}
    for r in st.retained:
        used.setdefault(r.cluster, set()).add(r.index)
    rejected: dict[str, str | None] = {}
    while missing and (best := queue.best()) is not None:
        name = best[1]
        demand = (name, ctx.demand(shape, ctx.clusters[name]))
        if demand in ctx.refused:
            queue.drop(best)
            rejected[name] = None   # the reason, only if needed (below)
            continue
        replica, why = reserve(ctx, shape, name, ledger, used.setdefault(name, set()))
        if replica is None:
            # Only the chosen cluster is ever charged while this deployment fills, so a
            # refusing cluster's pools stay as they are and it would refuse every later
            # replica too: drop it for the rest of this deployment.
            queue.drop(best)
            rejected[name] = why or "rejected"
            ctx.refused.add(demand)
            continue
        st.placed.append(replica)
        queue.took(best)
        missing -= 1
    if missing:
        why_not = {}
        for name, why in rejected.items():
            if why is None:
                # A refused cluster is never charged by this deployment afterwards, so
                # trying again on a throwaway trial gives the reason it had.
                why = place_replica(ctx.options(shape, ctx.clusters[name]), name, Trial(ledger))[1]
            why_not[name] = why or "rejected"
        reasons = _reasons(ctx, shape, why_not)
        first = len(st.retained) + len(st.placed)
        st.unplaced = [Unplaced(first + i, reasons) for i in range(missing)]


def filter_clusters(ctx: Context, shape: DeploymentShape) -> list[str]:
    """Clusters matching both selectors whose taints this deployment tolerates."""
    return ctx.open_clusters(shape)


class SpreadQueue:
    """The clusters a deployment may take a replica on, best first: fewest replicas of
    this deployment, then name (spread before pack, alphabetical tie-break). Clusters
    without one all weigh 0 and come in name order straight from the sorted candidate
    list, so only clusters holding replicas sit in a heap: a deployment's fill costs its
    replicas, not a heap entry per candidate cluster (a million at 1,000 clusters and
    1,000 deployments)."""

    def __init__(self, names: list[str], retained: list[PlacedReplica]) -> None:
        self._names = names                       # sorted (Context.open_clusters)
        self._next = 0
        load = Counter(r.cluster for r in retained if _contains(names, r.cluster))
        self._loaded = set(load)
        self._heap = [(n, name) for name, n in load.items()]
        heapq.heapify(self._heap)

    def best(self) -> tuple[int, str] | None:
        while self._next < len(self._names) and self._names[self._next] in self._loaded:
            self._next += 1
        fresh = (0, self._names[self._next]) if self._next < len(self._names) else None
        if fresh is not None and (not self._heap or fresh < self._heap[0]):
            return fresh
        return self._heap[0] if self._heap else None

    def drop(self, best: tuple[int, str]) -> None:
        """The cluster takes no more replicas of this deployment."""
        if best[0] == 0:
            self._next += 1
        else:
            heapq.heappop(self._heap)

    def took(self, best: tuple[int, str]) -> None:
        """The cluster took one more replica."""
        load, name = best
        if load == 0:
            self._next += 1
            self._loaded.add(name)
            heapq.heappush(self._heap, (1, name))
        else:
            heapq.heapreplace(self._heap, (load + 1, name))


def _contains(sorted_names: list[str], name: str) -> bool:
    i = bisect.bisect_left(sorted_names, name)
    return i < len(sorted_names) and sorted_names[i] == name


def reserve(ctx: Context, shape: DeploymentShape, name: str, ledger: Ledger,
            taken: set[int]) -> tuple[PlacedReplica | None, str | None]:
    """Place one replica on cluster `name` and charge the ledger, or charge nothing and
    say why not. The index is the lowest one this deployment does not use there."""
    engines, why = place_replica(ctx.options(shape, ctx.clusters[name]), name, ledger)
    if engines is None:
        return None, why
    index = 0
    while index in taken:
        index += 1
    taken.add(index)
    return PlacedReplica(replica_name(shape.name, name, index), index, name, engines), None


def _reasons(ctx: Context, shape: DeploymentShape, rejected: Mapping[str, str]) -> dict[str, str]:
    filtered = ctx.filter_reasons(shape)
    return {name: filtered.get(name) or rejected.get(name, "rejected") for name in ctx.clusters}
