"""Why a deployment the fill left short was refused everywhere: its `Refusals` summary, built
without asking each cluster (scheduler.refusals, scheduler.census).

When the fill ends short, every cluster refused. They are of three sorts:

* refused by a filter: the deployment's filter key's refusals, summarized once per key;
* tried, and refused by an admit or reserve hook (`DeploymentState.refused`): as many as the
  fill tried, each one's reason kept for feasibility (`DeploymentState.attempted`);
* stepped over because a plugin knew it refuses (`refuses_already`): most of a short
  deployment's clusters in a full fleet. Their reasons come from the plugin's `explain`, which
  answers alike for clusters of one class (scheduler.census), so each class of the filter key's
  open clusters is explained once, through its first member, and counted whole.

A known refusal is of kind CAPACITY, or the plugin's `never` hook says the cluster never fits:
feasibility reads them so. A class explained otherwise has its members written down
(`DeploymentState.known_other`), which no plugin of the registry gives in practice.

A deployment `place_fleet(explain=...)` names also gets every cluster's reason
(`Refusals.by_cluster`), worked out cluster by cluster as it always was.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping

from .census import Classes, ClassKey, LiveCensus, first, remaining
from .cycle import Binding, Cycle, DeploymentState, Filtered, Key
from .reasons import CAPACITY, Reason, resolve
from .refusals import EXAMPLES, Refusals, Tally, group_key
from .shape import ClusterView

# per filter key: its refusals by group (the first reason, how many, the first few by name)
FILTER_PARTS = Key[dict[tuple[object, ...], list[tuple[Reason, int, list[tuple[str, Reason]]]]]]("unplaced.filters")
# per filter key: its open clusters by class, kept in step with the fill
CENSUSES = Key[dict[tuple[object, ...], LiveCensus]]("unplaced.census")
# per cluster: (times the fill charged it, its class then)
CLASSES = Key[dict[str, tuple[int, ClassKey]]]("unplaced.classes")
NUMBERS = Key[Classes]("unplaced.numbers")
# per (filter key, knowers' and never hooks' keys, class): what was read of the class whole, when
# (census.moves then): its first members by name, their reason, whether it is other than capacity
READ = Key[dict[tuple[object, ...], dict[ClassKey, "_Read"]]]("unplaced.read")


class _Read:
    """What was read of a class whole: when (its census's `changed` then), its first members
    by name with their (one) reason, and whether that reason is other than capacity."""

    __slots__ = ("at", "examples", "other", "why")

    def __init__(self, at: int, examples: list[tuple[str, Reason]], why: Reason, *, other: bool) -> None:
        self.at, self.examples, self.why, self.other = at, examples, why, other


def refusals(cycle: Cycle, st: DeploymentState, filtered: Filtered, knowers: list[Binding]) -> Refusals:
    """The summary of why every cluster refused `st` when its fill ended short."""
    clusters = cycle.clusters
    attempted = st.attempted = {name: resolve(r) for name, r in st.refused.items()}
    tally = Tally()
    for why, n, examples in _filter_parts(cycle, filtered):
        tally.add(why, n, examples)
    tried: dict[tuple[str, str], list[str]] = {}
    for name, why in attempted.items():
        tried.setdefault(group_key(why), []).append(name)
    for names in tried.values():
        names.sort()
        tally.add(attempted[names[0]], len(names), [(n, attempted[n]) for n in names[:EXAMPLES]])
    if len(attempted) < len(filtered.open):
        census = _census(cycle, filtered)
        skips: dict[ClassKey, set[str]] = {}
        for name in attempted:
            skips.setdefault(census.of[name], set()).add(name)
        nevers = st.hooks["never"]
        memo = cycle.get(READ) or cycle.put(READ, {})
        alike = (filtered.key, *((k.name, k.refuses_key) for k in knowers),
                 *((b.name, b.scale_up_key) for b in nevers))
        read = memo.get(alike)
        if read is None:
            read = memo[alike] = {}
        changed = census.changed
        for key, members in census.members.items():
            skip = skips.get(key)
            if skip is None:
                hit = read.get(key)
                if hit is None or hit.at != changed.get(key, 0):
                    hit = read[key] = _read(st, clusters, members, (), knowers, nevers, changed.get(key, 0))
                tally.add(hit.why, len(members), hit.examples)
            elif len(members) > len(skip):
                hit = _read(st, clusters, members, skip, knowers, nevers, 0)
                tally.add(hit.why, len(members) - len(skip), hit.examples)
            else:
                continue
            if hit.other:
                for name in remaining(members, skip or ()):
                    st.known_other[name] = hit.why
    by_cluster = _by_cluster(cycle, st, filtered, knowers) if st.key in cycle.explain else None
    return tally.refusals(len(clusters), by_cluster)


def _read(st: DeploymentState, clusters: Mapping[str, ClusterView], members: list[str], skip: Collection[str],
          knowers: list[Binding], nevers: list[Binding], at: int) -> _Read:
    """A class's members but `skip` read through its first one: its reason, its first few."""
    named = first(members, skip, EXAMPLES)
    rep = clusters[named[0]]
    knower = next((k for k in knowers if k.refuses_already(rep)), None)
    if knower is None:
        raise AssertionError(f"{st.name}: {rep.name} was neither tried nor known to refuse")
    why = knower.explain(rep)
    other = why.kind != CAPACITY and all(b.never(rep) is None for b in nevers)
    return _Read(at, [(n, why) for n in named], why, other=other)


def _by_cluster(cycle: Cycle, st: DeploymentState, filtered: Filtered, knowers: list[Binding]) -> dict[str, Reason]:
    """Every cluster's first reason, asked cluster by cluster (an explained deployment)."""
    out = {}
    for name, cluster in cycle.clusters.items():
        why = filtered.reasons.get(name) or st.attempted.get(name)
        if why is None:
            knower = next(k for k in knowers if k.refuses_already(cluster))
            why = knower.explain(cluster)
        out[name] = why
    return out


def _filter_parts(cycle: Cycle, filtered: Filtered) -> list[tuple[Reason, int, list[tuple[str, Reason]]]]:
    memo = cycle.get(FILTER_PARTS) or cycle.put(FILTER_PARTS, {})
    hit = memo.get(filtered.key)
    if hit is None:
        groups: dict[tuple[str, str], tuple[list[int], list[tuple[str, Reason]]]] = {}
        for name, why in filtered.reasons.items():          # in cluster order
            n, examples = groups.setdefault(group_key(why), ([0], []))
            n[0] += 1
            if len(examples) < EXAMPLES:
                examples.append((name, why))
        hit = memo[filtered.key] = [(examples[0][1], n[0], examples) for n, examples in groups.values()]
    return hit


def _census(cycle: Cycle, filtered: Filtered) -> LiveCensus:
    """The filter key's open clusters by class, synced with what the fill charged since."""
    memo = cycle.get(CENSUSES) or cycle.put(CENSUSES, {})
    hit = memo.get(filtered.key)
    if hit is None:
        hit = memo[filtered.key] = LiveCensus(filtered.open, _classifier(cycle), cycle.touched)
    else:
        hit.sync()
    return hit


def _classifier(cycle: Cycle) -> Callable[[str], ClassKey]:
    """Each cluster's class now, worked out again only when the fill has charged it since."""
    known = cycle.get(CLASSES) or cycle.put(CLASSES, {})
    numbers = cycle.get(NUMBERS) or cycle.put(NUMBERS, Classes(cycle.ledger))
    clusters, charged = cycle.clusters, cycle.charged

    def classify(name: str) -> ClassKey:
        times = charged.get(name, 0)
        hit = known.get(name)
        if hit is None or hit[0] != times:
            hit = known[name] = (times, numbers.of(clusters[name]))
        return hit[1]

    return classify
