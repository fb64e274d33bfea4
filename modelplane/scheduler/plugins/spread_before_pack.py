"""spread-before-pack: the base score (semantics §2.7): the cluster with the fewest
replicas of this deployment first, ties by cluster name — spread first, pack only when
needed, alphabetical tie-break. It is the last score, so every other plugin's score
comes before it.

When it is the only score (no tiers, no spread), the fill takes clusters from its `queue`
hook, `SpreadQueue`, a lazy heap: clusters without a replica of the deployment all weigh 0 and
come in name order straight from the sorted list, so only clusters holding replicas sit
in a heap, and a deployment's fill costs its replicas, not a heap entry per cluster (a
million at 1,000 clusters and 1,000 deployments). Clusters another plugin already knows
refuse (`refuses_already`: device fit, for a demand they refused earlier in the pass) are
stepped over through the fill's `SkipList` (scheduler.queues), shared by every deployment of
the same filters and engines, so a full cluster costs each such group one look, not each
deployment one.
"""

from __future__ import annotations

import bisect
import heapq
from collections import Counter
from collections.abc import Callable
from typing import Self

from modelplane.scheduler.cycle import Binding, Cycle, DeploymentState
from modelplane.scheduler.queues import SkipList
from modelplane.scheduler.shape import ClusterView


class SpreadBeforePack(Binding):
    name = "spread-before-pack"

    def __init__(self, st: DeploymentState) -> None:
        self.st = st

    @classmethod
    def bind(cls, cycle: Cycle, st: DeploymentState) -> Self | None:  # noqa: ARG003 - the cycle is not needed
        return cls(st)

    def score(self, cluster: ClusterView) -> int:
        return self.st.replicas_on(cluster.name)

    def queue(self, names: list[str], skips: SkipList | None = None,
              refuses: Callable[[str], bool] | None = None) -> SpreadQueue:
        """The fill's order when this is the only score (the order its score gives); `skips`
        with `refuses` steps over clusters known to refuse without handing them to the fill."""
        return SpreadQueue(names, Counter(r.cluster for r in self.st.current), skips, refuses)


class SpreadQueue:
    """The clusters a deployment may take a replica on, best first by (load, name)."""

    def __init__(self, names: list[str], load: Counter[str], skips: SkipList | None = None,
                 refuses: Callable[[str], bool] | None = None) -> None:
        self._names = names                       # sorted
        self._skips, self._refuses = skips, refuses
        self._next = 0
        loaded = {c: n for c, n in load.items() if n > 0 and _contains(names, c)}
        self._loaded = set(loaded)
        self._heap = [(n, name) for name, n in loaded.items()]
        heapq.heapify(self._heap)
        self._best: tuple[int, str] | None = None

    def best(self) -> str | None:
        """The best cluster (None when none is left). Every cluster without a replica of
        the deployment weighs less than any with one, so those come first, by name."""
        names, skips, refuses, loaded = self._names, self._skips, self._refuses, self._loaded
        end = len(names)
        i = self._next
        while True:
            if skips is not None and refuses is not None:
                i = skips.find(i, refuses)
            if i < end and names[i] in loaded:
                i += 1
                continue
            break
        self._next = i
        if i < end:
            self._best = (0, names[i])
            return names[i]
        heap = self._heap
        while heap and refuses is not None and refuses(heap[0][1]):
            heapq.heappop(heap)                 # known to refuse: never handed out
        self._best = heap[0] if heap else None
        return self._best[1] if self._best is not None else None

    @property
    def screens(self) -> bool:
        """Whether every cluster it hands out has been checked with `refuses`."""
        return self._refuses is not None

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
