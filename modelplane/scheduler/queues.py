"""The order in which one deployment's fill asks clusters: the `ClusterQueue` protocol (the
fill's own `fill.ScoredQueue`, or a plugin's `queue` hook when its score is the only one),
and the `SkipList` of clusters known to refuse, shared by every deployment alike."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol


class ClusterQueue(Protocol):
    """The order of clusters for one deployment's fill: `best()` (None when none is left),
    then `took(best)` or `drop(best)`."""

    def best(self) -> str | None: ...

    def took(self, name: str) -> None: ...

    def drop(self, name: str) -> None: ...


class SkipList:
    """Over a sorted list of clusters, the next one at or after a position that no plugin
    knows to refuse. Refusals it records are permanent (a `refuses_already` answer stays
    true for the pass), so the steps are shortened as they are found (path halving): the
    deployments sharing it walk each refusing cluster once between them."""

    def __init__(self, names: list[str]) -> None:
        self.names = names
        self._next = list(range(len(names) + 1))     # i -> a position at or before the next one to look at

    def find(self, i: int, refuses: Callable[[str], bool]) -> int:
        """The first position >= i whose cluster `refuses` does not refuse (len(names) if none)."""
        nxt, names, end = self._next, self.names, len(self.names)
        while True:
            while nxt[i] != i:                        # follow (and halve) the recorded steps
                nxt[i] = nxt[nxt[i]]
                i = nxt[i]
            if i == end or not refuses(names[i]):
                return i
            nxt[i] = i + 1
