"""spread-before-pack: the base score (semantics §2.7): the cluster with the fewest
replicas of this deployment first, ties by cluster name — spread first, pack only when
needed, alphabetical tie-break. It is the last score, so every other plugin's score
comes before it.

When it is the only score (no tiers, no spread), the fill takes clusters from
`SpreadQueue`, a lazy heap: clusters without a replica of the deployment all weigh 0 and
come in name order straight from the sorted list, so only clusters holding replicas sit
in a heap, and a deployment's fill costs its replicas, not a heap entry per cluster (a
million at 1,000 clusters and 1,000 deployments).
"""

from __future__ import annotations

import bisect
import heapq
from collections import Counter
from typing import Self

from modelplane.scheduler.cycle import Binding, Cycle, DeploymentState, Reservation
from modelplane.scheduler.reasons import Reason
from modelplane.scheduler.shape import ClusterView


class SpreadBeforePack(Binding):
    name = "spread-before-pack"
    reserve_refuses = False

    def __init__(self, st: DeploymentState) -> None:
        self.st = st
        self.load: Counter[str] = Counter()

    @classmethod
    def bind(cls, cycle: Cycle, st: DeploymentState) -> Self | None:  # noqa: ARG003 - the cycle is not needed
        return cls(st)

    def begin(self) -> None:
        self.load = Counter(r.cluster for r in self.st.current)

    def score(self, cluster: ClusterView) -> int:
        return self.load.get(cluster.name, 0)

    def reserve(self, r: Reservation) -> Reason | None:
        self.load[r.cluster.name] += 1
        return None

    def unreserve(self, r: Reservation) -> None:
        self.load[r.cluster.name] -= 1

    def queue(self, names: list[str]) -> SpreadQueue:
        return SpreadQueue(names, self.load)


class SpreadQueue:
    """The clusters a deployment may take a replica on, best first by (load, name)."""

    def __init__(self, names: list[str], load: Counter[str]) -> None:
        self._names = names                       # sorted
        self._next = 0
        loaded = {c: n for c, n in load.items() if n > 0 and _contains(names, c)}
        self._loaded = set(loaded)
        self._heap = [(n, name) for name, n in loaded.items()]
        heapq.heapify(self._heap)
        self._best: tuple[int, str] | None = None

    def best(self) -> str | None:
        while self._next < len(self._names) and self._names[self._next] in self._loaded:
            self._next += 1
        fresh = (0, self._names[self._next]) if self._next < len(self._names) else None
        if fresh is not None and (not self._heap or fresh < self._heap[0]):
            self._best = fresh
        else:
            self._best = self._heap[0] if self._heap else None
        return self._best[1] if self._best is not None else None

    def drop(self, name: str) -> None:
        """`name` (the best) takes no more replicas of this deployment."""
        assert self._best is not None and self._best[1] == name
        if self._best[0] == 0:
            self._next += 1
        else:
            heapq.heappop(self._heap)

    def took(self, name: str) -> None:
        """`name` (the best) took one more replica."""
        assert self._best is not None and self._best[1] == name
        load = self._best[0]
        if load == 0:
            self._next += 1
            self._loaded.add(name)
            heapq.heappush(self._heap, (1, name))
        else:
            heapq.heapreplace(self._heap, (load + 1, name))


def _contains(sorted_names: list[str], name: str) -> bool:
    i = bisect.bisect_left(sorted_names, name)
    return i < len(sorted_names) and sorted_names[i] == name
