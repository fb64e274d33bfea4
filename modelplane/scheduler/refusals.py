"""Why the clusters refused a deployment's unplaced replicas, as a summary: one group per
distinct refusal (the plugin and its code), with how many clusters gave it and the first few
by name, each with its own reason, as kube-scheduler's `0/5000 nodes are available: 4000
Insufficient gpu, 1000 node(s) had taint`. The clusters a selector excludes are one group.

The summary is what `plan`, `plan --json`, `pulumi preview` and the program's outputs carry: its
size is bounded by the distinct refusals, not by the fleet (at 10,000 clusters a per-cluster map
was ~1 MB of JSON per short deployment, and it stayed in memory). The full per-cluster map
(`by_cluster`) is kept only for the deployments `place_fleet(explain=...)` names (`plan
--explain`). A summary names at most `EXAMPLES` clusters per group: below that it is the whole
map (a small fleet reads as it did).

The fill builds it without visiting each cluster (scheduler.fill, scheduler.census);
`summarize` builds the same from a full map (explained deployments, old documents, tests).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from modelplane.json_types import JsonObject, JsonValue

from .jsonfields import PlacementFormatError, Where, at, count, need, strings
from .reasons import CAPACITY, NEVER, POLICY, RECORDED, Kind, Reason, recorded

EXAMPLES = 3            # clusters named per group
_KINDS: dict[str, Kind] = {k: k for k in (POLICY, CAPACITY, NEVER)}


@dataclass(frozen=True, slots=True)
class RefusalGroup:
    """The clusters that refused for one (plugin, code): how many, and the first `EXAMPLES`
    of them by name with their own reasons (their messages may differ: `short by 3` and
    `short by 8` are one group)."""

    plugin: str
    code: str
    kind: Kind
    count: int
    examples: tuple[tuple[str, Reason], ...]

    @property
    def whole(self) -> bool:
        """Every cluster of the group is named."""
        return self.count == len(self.examples)

    def to_json(self) -> JsonObject:
        return {"plugin": self.plugin, "code": self.code, "kind": self.kind, "clusters": self.count,
                "examples": {name: why.message for name, why in self.examples}}

    @classmethod
    def from_json(cls, g: JsonValue, where: Where) -> RefusalGroup:
        plugin, code = need(g, "plugin", str, where), need(g, "code", str, where)
        text = need(g, "kind", str, where)
        kind = _KINDS.get(text)
        if kind is None:
            raise PlacementFormatError(f"{at((*where, 'kind'))}: expected one of {', '.join(_KINDS)}, got {text!r}")
        examples = strings(need(g, "examples", dict, where), (*where, "examples"))
        if not examples or len(examples) > EXAMPLES:
            raise PlacementFormatError(f"{at((*where, 'examples'))}: expected 1 to {EXAMPLES} clusters")
        total = count(g, "clusters", where)
        if total < len(examples):
            raise PlacementFormatError(f"{at((*where, 'clusters'))}: fewer than the {len(examples)} examples")
        return cls(plugin, code, kind, total,
                   tuple((name, Reason(code, plugin, message, kind)) for name, message in examples.items()))


@dataclass(frozen=True, slots=True)
class Refusals:
    """Every cluster's refusal of one deployment's unplaced replicas, summarized: `clusters`
    refused in all (every cluster of the fleet), `groups` in the order of their first
    cluster's name. `by_cluster`: every cluster's reason, for a deployment place_fleet was
    asked to explain (None otherwise; it is no part of equality or of the JSON)."""

    clusters: int
    groups: tuple[RefusalGroup, ...]
    by_cluster: Mapping[str, Reason] | None = None

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Refusals):
            return NotImplemented
        return self is other or (self.clusters == other.clusters and self.groups == other.groups)

    def __hash__(self) -> int:
        return hash((self.clusters, self.groups))

    def every(self) -> Mapping[str, Reason] | None:
        """Every cluster's reason, in cluster order, where they are known: kept (explained), or
        every group small enough to be named whole. None otherwise."""
        if self.by_cluster is not None:
            return self.by_cluster
        if all(g.whole for g in self.groups):
            return dict(sorted(example for g in self.groups for example in g.examples))
        return None

    def reason(self, cluster: str) -> Reason | None:
        """The cluster's reason where it is known: every cluster's when explained, else a
        named example's."""
        if self.by_cluster is not None:
            return self.by_cluster.get(cluster)
        return next((why for g in self.groups for name, why in g.examples if name == cluster), None)

    def to_json(self) -> JsonObject:
        return {"clusters": self.clusters, "groups": [g.to_json() for g in self.groups]}

    @classmethod
    def from_json(cls, r: JsonValue, where: Where) -> Refusals:
        groups = tuple(RefusalGroup.from_json(g, (*where, "groups", i))
                       for i, g in enumerate(need(r, "groups", list, where)))
        total = count(r, "clusters", where)
        if sum(g.count for g in groups) != total:
            raise PlacementFormatError(f"{at((*where, 'clusters'))}: {total}, but its groups hold "
                                       f"{sum(g.count for g in groups)}")
        return cls(total, groups)

    @classmethod
    def from_messages(cls, texts: Mapping[str, str]) -> Refusals:
        """A per-cluster map of messages, as documents before the summary held them."""
        return summarize({cluster: recorded(text) for cluster, text in texts.items()})


def group_key(why: Reason) -> tuple[str, str]:
    """What makes two refusals one group: the plugin and its code (a reason read back from an
    old document has only its words: those)."""
    return (why.plugin, why.code if why.code != RECORDED else why.message)


class Tally:
    """Groups being summed from parts (the filters', the tried clusters', a class of clusters
    alike): per group, the count and the first `EXAMPLES` names with their reasons."""

    __slots__ = ("_groups",)

    def __init__(self) -> None:
        self._groups: dict[tuple[str, str], tuple[list[int], list[tuple[str, Reason]]]] = {}

    def add(self, why: Reason, n: int, examples: Iterable[tuple[str, Reason]]) -> None:
        """`n` clusters refusing as `why` does, of which `examples` (the first of this part by
        name: at least `EXAMPLES` of them, or all)."""
        key = (why.plugin, why.code if why.code != RECORDED else why.message)     # group_key, inline: hot
        hit = self._groups.get(key)
        if hit is None:
            hit = self._groups[key] = ([0], [])
        hit[0][0] += n
        hit[1].extend(examples)

    def refusals(self, clusters: int, by_cluster: Mapping[str, Reason] | None = None) -> Refusals:
        groups = []
        for n, examples in self._groups.values():
            if n[0]:
                named = tuple(sorted(examples, key=_name)[:EXAMPLES])
                why = named[0][1]
                groups.append(RefusalGroup(why.plugin, why.code, why.kind, n[0], named))
        groups.sort(key=lambda g: g.examples[0][0])
        return Refusals(clusters, tuple(groups), by_cluster)


def _name(example: tuple[str, Reason]) -> str:
    return example[0]


def summarize(by_cluster: Mapping[str, Reason], *, keep: bool = False) -> Refusals:
    """The summary of a full per-cluster map (kept in `by_cluster` with `keep`)."""
    names: dict[tuple[str, str], list[str]] = {}
    for name, why in by_cluster.items():
        names.setdefault(group_key(why), []).append(name)
    tally = Tally()
    for members in names.values():
        members.sort()
        why = by_cluster[members[0]]
        tally.add(why, len(members), [(m, by_cluster[m]) for m in members[:EXAMPLES]])
    return tally.refusals(len(by_cluster), by_cluster if keep else None)


def refusal_lines(refusals: Refusals) -> list[str]:
    """The summary as people read it, in cluster order: `cluster: reason` for each cluster of a
    group small enough to name whole, else one line where its first cluster stands,
    `N clusters (plugin Code), e.g. a, b, c: reason` (or each example with its own reason)."""
    out: list[tuple[str, str]] = []          # (the cluster it stands at, the line), sorted
    for g in refusals.groups:
        if g.whole:
            out += [(name, f"{name}: {why.message}") for name, why in g.examples]
            continue
        what = f"{g.plugin} {g.code}" if g.code != RECORDED else ""
        label = f"{g.count} clusters" + (f" ({what.strip()})" if what.strip() else "")
        first = g.examples[0][0]
        if len({why.message for _, why in g.examples}) == 1:
            out.append((first, f"{label}, e.g. {', '.join(n for n, _ in g.examples)}: {g.examples[0][1].message}"))
        else:
            out.append((first, f"{label}, e.g. " + "; ".join(f"{n}: {why.message}" for n, why in g.examples)))
    return [line for _, line in sorted(out)]
