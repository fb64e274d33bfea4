"""Clusters alike: the classes of clusters stamped from one template (the same pools, sizes
and zones: `ClusterView.template_id`) in the same ledger state.

What a plugin answers about one more replica on a cluster depends on the cluster only through
its class: the words and kind of a refusal it knows without trying (`explain`), whether no size
of the cluster could hold it (`never`), the nodes a scale-up adds (`scale_up`). So a summary of
why every cluster refused, or a search for the cluster that needs the fewest nodes, asks once
per class and counts the rest: a fleet of 10,000 clusters after a fill has about 40 classes,
where asking each cluster made the explanations grow with clusters x short deployments.

A `Census` holds some clusters (one filter key's) by class, each class's members in name
order. `LiveCensus` follows the ledger while the fill charges it: the fill logs every cluster
it charges (`Cycle.touched`), and a sync re-classes only those.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Collection, Iterable, Iterator

from .growth import cluster_keys, fingerprint
from .ledger import Ledger
from .shape import ClusterView

ClassKey = int          # a class's number (`Classes`)


class Classes:
    """A number per class: (template, every pool's and zone's state on `ledger`), so that the
    census keys, moves and compares small ints."""

    def __init__(self, ledger: Ledger) -> None:
        self._ledger = ledger
        self._numbers: dict[tuple[object, ...], int] = {}

    def of(self, cluster: ClusterView) -> ClassKey:
        ledger = self._ledger
        key = (cluster.template_id, *(fingerprint(ledger.state(k)) for k in cluster_keys(cluster)))
        number = self._numbers.get(key)
        if number is None:
            number = self._numbers[key] = len(self._numbers)
        return number


class Census:
    """Clusters by class; each class's members sorted by name."""

    def __init__(self, names: Iterable[str], classify: Callable[[str], ClassKey]) -> None:
        self.of: dict[str, ClassKey] = {}
        self.members: dict[ClassKey, list[str]] = {}
        self.moves = 0              # members moved so far: what was read of a class before holds while
        self.changed: dict[ClassKey, int] = {}      # a class -> `moves` when it last changed (0: never)
        for name in sorted(names):
            key = self.of[name] = classify(name)
            self.members.setdefault(key, []).append(name)

    def __len__(self) -> int:
        return len(self.of)

    def move(self, name: str, key: ClassKey) -> None:
        """`name` is now of class `key`."""
        old = self.of[name]
        if old == key:
            return
        members = self.members[old]
        del members[bisect.bisect_left(members, name)]
        if not members:
            del self.members[old]
        self.of[name] = key
        bisect.insort(self.members.setdefault(key, []), name)
        self.moves += 1
        self.changed[old] = self.changed[key] = self.moves


def first(members: list[str], skip: Collection[str], n: int) -> list[str]:
    """The first `n` of `members` not in `skip` (a walk of at most n + len(skip) names)."""
    out: list[str] = []
    if n <= 0:
        return out
    for name in members:
        if name not in skip:
            out.append(name)
            if len(out) == n:
                break
    return out


def remaining(members: list[str], skip: Collection[str]) -> Iterator[str]:
    return (name for name in members if name not in skip)


class LiveCensus(Census):
    """A census that follows the ledger: `sync` re-classes the clusters the fill charged since
    the last sync (from the cycle's log of them)."""

    def __init__(self, names: Iterable[str], classify: Callable[[str], ClassKey], log: list[str]) -> None:
        super().__init__(names, classify)
        self._classify, self._log, self._seen = classify, log, len(log)

    def sync(self) -> None:
        log = self._log
        if self._seen == len(log):
            return
        of = self.of
        for name in dict.fromkeys(log[self._seen:]):      # in log order: deterministic
            if name in of:
                self.move(name, self._classify(name))
        self._seen = len(log)
