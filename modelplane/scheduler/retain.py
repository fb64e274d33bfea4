"""The stages of kept replicas: retain, then scale down (semantics §2.7).

* retain — every deployment keeps the previous replicas that still fit their pins: the
  cluster exists, no candidate filter refuses it (selectors, cache staging), no other
  replica has its identity (cluster, index: the first by name wins), and every plugin's
  `keep` hook agrees (taints: an untolerated NoExecute evicts; device fit: the pins still
  match the current spec, which sets what the replica charges). Capacity is not checked:
  an existing replica is an input, not a decision.
* scale down — while a deployment keeps more than it wants, the replica maximizing
  (tier rank under clusterPreferences, replicas of it on the cluster, cluster name,
  index) leaves: the least preferred tier first, then the most-loaded cluster, ties to
  the later name, then the highest index. A scaled-down replica ends its move back.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable

from modelplane.naming import replica_name

from .cycle import Cycle, DeploymentState, Keeping
from .moves import MOVES
from .placement_types import DeploymentPlacement, EnginePlacement, PlacedReplica
from .reasons import CLUSTER_GONE, DUPLICATE, MOVE_CANCELLED, PINS_CHANGED, SCALED_DOWN, Reason
from .shape import DeploymentShape


def retain(cycle: Cycle) -> None:
    previous = cycle.previous.by_key() if cycle.previous is not None else {}
    for st in cycle.deployments:
        prev = previous.get(st.key)
        if prev is not None:
            _retain(cycle, st, prev)


def _retain(cycle: Cycle, st: DeploymentState, previous: DeploymentPlacement) -> None:
    shape = st.shape
    if shape.invalid:
        # Can't re-resolve against an uncompilable spec: hold the replicas as they are
        # (never tear down infrastructure over an input error). They charge nothing.
        for rep in sorted((_complete(shape, r) for r in previous.replicas), key=lambda r: (r.cluster, r.index)):
            st.keep(rep, [])
        return
    not_candidate = cycle.filtered(st).not_candidate
    keepers = st.hooks["keep"]
    seen: set[tuple[str, int]] = set()
    for rep in sorted(previous.replicas, key=lambda r: r.name):
        index = rep.index if rep.index >= 0 else 0
        cluster = cycle.clusters.get(rep.cluster) if rep.cluster else None
        if cluster is None:
            st.drop(rep, Reason(CLUSTER_GONE, "retain", f"cluster {rep.cluster!r} is gone"))
            continue
        why = not_candidate.get(cluster.name)
        if why:
            st.drop(rep, why)
            continue
        ident = (cluster.name, index)
        if ident in seen:
            st.drop(rep, Reason(DUPLICATE, "retain", f"duplicate of replica {cluster.name}#{index}"))
            continue
        kept = Keeping(rep, cluster, index)
        why = next((w for b in keepers if (w := b.keep(kept)) is not None), None)
        if why is not None or kept.engines is None:
            st.drop(rep, why or Reason(PINS_CHANGED, "retain", "no longer matches"))
            continue
        seen.add(ident)
        st.keep(PlacedReplica(replica_name(shape.name, cluster.name, index), index, cluster.name, kept.engines),
                kept.charges)


def _complete(shape: DeploymentShape, rep: PlacedReplica) -> PlacedReplica:
    """A held replica read from JSON without "members": spell its members' pools out."""
    engines = {}
    for name, placed in rep.engines.items():
        engine = shape.engine(name)
        if not placed.member_pools and engine is not None:
            placed = EnginePlacement(placed.pool, placed.pools_for(len(engine.members)), placed.requests)
        engines[name] = placed
    return PlacedReplica(rep.name, rep.index, rep.cluster, engines)


def scale_down(cycle: Cycle) -> None:
    for st in cycle.deployments:
        if not st.shape.invalid:
            scale_down_replicas(st, tier_rank(cycle, st))


def tier_rank(cycle: Cycle, st: DeploymentState) -> Callable[[str], int] | None:
    """Cluster -> its tier's rank under the deployment's clusterPreferences (None: no tiers)."""
    prefs = st.policy.preferences
    if prefs is None:
        return None
    return lambda cluster: prefs.rank(cycle.clusters[cluster])


def scale_down_replicas(st: DeploymentState, rank: Callable[[str], int] | None = None) -> None:
    """Drop kept replicas until `desired` remain, the removal order of the module docstring.
    A heap of clusters keyed (-rank, -load, -rank of the name), each with its replicas by
    index: O(n log n), so 20,000 kept replicas scale down in milliseconds."""
    excess = len(st.retained) - st.desired
    if excess <= 0:
        return
    by_cluster: dict[str, list[PlacedReplica]] = {}
    for r in st.retained:
        by_cluster.setdefault(r.cluster, []).append(r)
    for reps in by_cluster.values():
        reps.sort(key=lambda r: r.index)
    heap = [(-(rank(c) if rank else 0), -len(by_cluster[c]), -i, c) for i, c in enumerate(sorted(by_cluster))]
    heapq.heapify(heap)
    moves = st.get(MOVES)
    for _ in range(excess):
        tier, load, name_rank, cluster = heapq.heappop(heap)
        victim = by_cluster[cluster].pop()
        st.drop(victim, Reason(SCALED_DOWN, "scale-down", "scaled down"))
        if load + 1 < 0:
            heapq.heappush(heap, (tier, load + 1, name_rank, cluster))
        if moves is None:
            continue
        for _, new, _ in [p for p in moves.pending if p[0] is victim]:
            st.drop(new, Reason(MOVE_CANCELLED, "scale-down",
                                f"move cancelled: {victim.name}, which it was to replace, was scaled down"))
        moves.pending = [p for p in moves.pending if p[0] is not victim]
