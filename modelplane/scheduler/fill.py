"""Stage `fill`: the one fill loop. Deployments in (namespace, name) order, one replica at a
time, filter -> score -> reserve over the deployment's plugin bindings:

1. filter — the clusters no `filter` hook refuses (memoized per the hooks' keys: every
   deployment with the same selectors, tolerations and tiers shares the answer);
2. score — the best cluster by (each `score` hook in registry order, cluster name); when
   one plugin scores alone and has a `queue` hook, its queue serves the order (spread-before-
   pack's lazy heap), else `ScoredQueue`;
3. admit — every `admit` hook may refuse the cluster (spread);
4. reserve — every `reserve` hook in registry order (the plugin that `places_engines`,
   device fit, places them on the ledger; budgets charge their devices); a refusal undoes
   the earlier ones (`unreserve`) and charges nothing. On success the replica takes the
   lowest index this deployment does not use on the cluster.

A cluster that refuses is not asked again for this deployment: every refusal stays true
while the deployment fills. The fill stops when the deployment has its replicas or no
cluster is left; then why every cluster refused is summarized once for all the replicas
left unplaced (`Unplaced.refusals`, shared; scheduler.unplaced), without asking each
cluster that a plugin knew to refuse.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable

from modelplane.naming import replica_name

from . import unplaced
from .cycle import Binding, Cycle, DeploymentState, Filtered, Key, Reservation
from .ledger import Trial
from .placement_types import PlacedReplica, Unplaced
from .queues import ClusterQueue, SkipList
from .reasons import REJECTED, Reason, Refusal
from .shape import ClusterView

_REJECTED = Reason(REJECTED, "", "rejected")


def fill(cycle: Cycle) -> None:
    for st in cycle.deployments:
        fill_deployment(cycle, st)


def hooks(st: DeploymentState, hook: str) -> list[Binding]:
    return st.hooks[hook]


def score_key(st: DeploymentState, cluster: ClusterView) -> tuple[object, ...]:
    """Where the cluster ranks for one more replica of `st`: lower is better."""
    return (*(b.score(cluster) for b in hooks(st, "score")), cluster.name)


def admit_reason(st: DeploymentState, cluster: ClusterView, remaining: int) -> Refusal | None:
    for b in hooks(st, "admit"):
        why = b.admit(cluster, remaining)
        if why is not None:
            return why
    return None


def fill_deployment(cycle: Cycle, st: DeploymentState) -> None:
    if st.shape.invalid:
        return
    filtered = cycle.filtered(st)
    st.candidates = len(filtered.candidates)
    for b in hooks(st, "begin"):
        b.begin()
    missing = st.desired + st.surge - len(st.retained)
    if missing <= 0:
        return
    clusters = cycle.clusters
    admitters = hooks(st, "admit")
    knowers = hooks(st, "refuses_already")
    reservers = hooks(st, "reserve")
    direct = _direct(reservers)
    scorers = hooks(st, "score")
    own: ClusterQueue | None = None
    knowers_here = knowers
    if len(scorers) == 1 and "queue" in scorers[0].overrides:
        if knowers and not admitters:       # nothing may refuse before the knowers: skip in bulk
            own = scorers[0].queue(filtered.open, _skip_list(cycle, filtered, knowers), _refuses(knowers, clusters))
            knowers_here = [] if own is not None else knowers   # the queue asked them already
        else:
            own = scorers[0].queue(filtered.open)
    queue = own if own is not None else ScoredQueue(filtered.open, st, scorers, clusters)
    refused = st.refused
    while missing and (name := queue.best()) is not None:
        cluster = clusters[name]
        why: Refusal | None = None
        for a in admitters:
            why = a.admit(cluster, missing)
            if why is not None:
                break
        if why is None:
            knower = None
            for k in knowers_here:
                if k.refuses_already(cluster):
                    knower = k
                    break
            if knower is not None:          # refused, says a plugin that knows without trying
                queue.drop(name)
                continue
            replica, why = reserve(cycle, st, cluster, reservers, direct=direct)
            if replica is not None:
                missing -= 1
                queue.took(name)
                continue
        queue.drop(name)
        refused[name] = why or _REJECTED
    if missing:
        for b in hooks(st, "unplaced"):
            b.unplaced(missing)
        refusals = unplaced.refusals(cycle, st, filtered, knowers)
        first = len(st.retained) + len(st.placed) - st.surge
        st.unplaced = [Unplaced(first + i, refusals) for i in range(missing)]


SKIPS = Key[dict[tuple[object, ...], SkipList]]("fill")


def _skip_list(cycle: Cycle, filtered: Filtered, knowers: list[Binding]) -> SkipList:
    """The skip list of every deployment with these filters and these knowers' keys."""
    memo = cycle.get(SKIPS) or cycle.put(SKIPS, {})
    key = (filtered.key, *((k.name, k.refuses_key) for k in knowers))
    hit = memo.get(key)
    if hit is None:
        hit = memo[key] = SkipList(filtered.open)
    return hit


def _refuses(knowers: list[Binding], clusters: dict[str, ClusterView]) -> Callable[[str], bool]:
    if len(knowers) == 1:
        knower = knowers[0]
        return lambda name: knower.refuses_already(clusters[name])
    return lambda name: any(k.refuses_already(clusters[name]) for k in knowers)


def _direct(reservers: list[Binding]) -> bool:
    """Charge the ledger directly when at most one reserve hook may refuse: a failed
    placement leaves the ledger as it was, so no copy-on-write trial is needed."""
    return sum(1 for b in reservers if b.reserve_refuses) <= 1


def reserve(cycle: Cycle, st: DeploymentState, cluster: ClusterView, reservers: list[Binding] | None = None,
            *, direct: bool | None = None, commit: bool = True) -> tuple[PlacedReplica | None, Refusal | None]:
    """Run every reserve hook for one replica of `st` on `cluster`. Committed: the replica,
    placed and charged. With commit=False only whether it would fit (a placeholder
    replica), everything undone."""
    if reservers is None:
        reservers = hooks(st, "reserve")
    if direct is None:
        direct = _direct(reservers)
    r = Reservation(cluster, cycle.ledger if direct and commit else Trial(cycle.ledger))
    for done, b in enumerate(reservers):
        why = b.reserve(r)
        if why is not None:
            for d in reversed(reservers[:done]):
                d.unreserve(r)
            return None, why
    engines = r.engines
    if engines is None:
        raise AssertionError(f"no reserve hook of {st.name} placed its engines: pipeline.start checks that a "
                             "plugin of the registry places_engines, and it must set Reservation.engines")
    if not commit:
        for d in reversed(reservers):
            d.unreserve(r)
        return PlacedReplica("", -1, cluster.name, engines), None
    if not direct:
        r.ledger.commit()   # type: ignore[union-attr]  # a Trial whenever not direct
    name = cluster.name
    cycle.commits += 1
    cycle.charged[name] = cycle.charged.get(name, 0) + 1
    cycle.touched.append(name)
    index = st.take_index(name)
    replica = PlacedReplica(replica_name(st.shape.name, name, index), index, name, engines)
    st.place(replica)
    return replica, None


class ScoredQueue:
    """Clusters by (every score hook, name), a lazy heap: a key is checked again when its
    cluster comes up (scores only grow for a cluster that took a replica); a hook whose
    other clusters' scores may have dropped (`rescore_all`) re-sorts them all."""

    def __init__(self, names: list[str], st: DeploymentState, scorers: list[Binding],
                 clusters: dict[str, ClusterView]) -> None:
        self._st, self._scorers, self._clusters = st, scorers, clusters
        self._heap = [(self._key(n), n) for n in names]
        heapq.heapify(self._heap)

    def _key(self, name: str) -> tuple[object, ...]:
        cluster = self._clusters[name]
        return (*(b.score(cluster) for b in self._scorers), name)

    def best(self) -> str | None:
        while self._heap:
            key, name = self._heap[0]
            fresh = self._key(name)
            if fresh == key:
                return name
            heapq.heapreplace(self._heap, (fresh, name))     # grew since queued: look again
        return None

    def drop(self, name: str) -> None:
        assert self._heap[0][1] == name
        heapq.heappop(self._heap)

    def took(self, name: str) -> None:
        if any([b.rescore_all() for b in self._scorers]):      # every hook hears of it
            self._heap = [(self._key(n), n) for _, n in self._heap]
            heapq.heapify(self._heap)
        else:
            heapq.heapreplace(self._heap, (self._key(name), name))
