"""The summary of refusals and the verdicts, worked out by class (scheduler.census), against
the same worked out cluster by cluster (issue 31).

The fill summarizes why every cluster refused a short deployment by asking one cluster of
each class; feasibility searches the classes for the cluster that needs the fewest nodes.
Here every deployment is also explained cluster by cluster (`explain=EVERY_DEPLOYMENT`) and:

* the summary of that full map (`refusals.summarize`) is the one the fill built;
* the verdicts are the ones the feasibility stage gave before it took clusters by class
  (`old_verdicts`: that code as it was, over the full map, kept here as the oracle);

on fleets with many clusters of a few templates in many states (the benchmarks' generators,
scarce and oversubscribed, with caches, drains, zones and gangs), policies (spread, tiers,
budgets, taints) and every example fleet.
"""

from __future__ import annotations

import heapq
import json
from collections.abc import Callable, Mapping

import pytest

from modelplane.api import Fleet, load_documents, load_manifests
from modelplane.cel import SelectorCache
from modelplane.scheduler import EVERY_DEPLOYMENT, FleetPlacement, PlacementFormatError, pipeline, place_fleet, plugins
from modelplane.scheduler.cycle import Cycle, DeploymentState
from modelplane.scheduler.feasibility import (
    Assessor,
    Plan,
    _hook_keys,
    _policy_names,
    _some,
    pool_sizes,
)
from modelplane.scheduler.fleet_budgets import book
from modelplane.scheduler.ledger import Trial
from modelplane.scheduler.matching import Matcher
from modelplane.scheduler.policy_types import BLOCKED, FITS_AFTER_SCALE_UP, NOT_FEASIBLE, Feasibility
from modelplane.scheduler.reasons import NEVER, POLICY, RECORDED, Reason
from modelplane.scheduler.refusals import Refusals, refusal_lines, summarize
from modelplane.scheduler.shape import ClusterView
from modelplane.words import counted
from tests.manifests import (
    cluster,
    deployment,
    engine,
    fleet_budget,
    gpu_class,
    placement_policy,
    pool,
    preferences,
    spread,
    standalone,
    taint,
    tier,
)

from .test_plan_snapshots import ROOT, _bench


def policy_fleet() -> list[dict]:
    """48 clusters of three templates in two regions, some drained; deployments with spread
    rules (one that keeps to one region), tiers and a budget, one pinned to the drained
    clusters; more demand than room."""
    docs: list[dict] = [gpu_class("g1", 1), gpu_class("g8", 8)]
    for c in range(48):
        pools = [pool("big", "g8", 1 + c % 3), pool("small", "g1", 2)]
        drained = c % 7 == 6
        docs.append(cluster(f"c-{c:02d}", *pools, labels={"region": "us" if c % 2 else "eu", "tier": f"t{c % 3}",
                                                          "drained": "yes" if drained else "no"},
                            taints=[taint("drain")] if drained else None))
    rules = [placement_policy(spread("region", 2, 2)),
             placement_policy(prefs=preferences(tier("first", tier="t0"), tier("second", tier="t1"))),
             placement_policy(spread("region", 1, 1)),
             None]
    for i in range(12):
        docs.append(deployment(f"m-{i:02d}", 9 + i, engine("main", standalone(gpus=1 + 3 * (i % 3))),
                               namespace="team" if i % 2 else "other", policy=rules[i % 4]))
    docs.append(deployment("pinned", 2, engine("main", standalone()), selector={"drained": "yes"}))
    docs.append(fleet_budget("team", 150, namespaces=["team"]))
    return docs


def generated() -> dict[str, Callable[[], list[dict]]]:
    scale_fleet, oversubscribed, scheduler = _bench("scale_fleet"), _bench("oversubscribed_fleet"), _bench("scheduler")
    return {
        "scale-60": lambda: scale_fleet.fleet(60, 60),                                 # type: ignore[attr-defined]
        "scale-60-scarce": lambda: scale_fleet.fleet(60, 80, capacity=1 / 1.3),        # type: ignore[attr-defined]
        "oversubscribed-80": lambda: oversubscribed.fleet(80, 80),                     # type: ignore[attr-defined]
        "grid-40x800-half": lambda: scheduler.generate(40, 2, 800, 0.5),              # type: ignore[attr-defined]
        "policies-48": policy_fleet,
    }


FLEETS = sorted(generated())
EXAMPLES = sorted(p.name for p in (ROOT / "examples").iterdir() if p.is_dir())


def _fleet(name: str) -> Fleet:
    if name in EXAMPLES:
        return load_manifests(ROOT / "examples" / name)
    return load_documents(generated()[name]())


# ------------------------------------------------------------------ the oracle

class OldAssessor(Assessor):
    """The verdicts as feasibility gave them before it took clusters by class: cluster by
    cluster over the full map of reasons (the only change: a Blocked verdict names at most
    three clusters per policy, as it does now)."""

    def old_verdicts(self, st: DeploymentState, count: int, reasons: Mapping[str, Reason]) -> list[Feasibility]:
        hook_keys = _hook_keys(st)
        cycle, budgets = self.cycle, st.policy.budgets
        filtered = cycle.filtered(st)
        candidates = filtered.candidates
        if not candidates:
            first_filtered = next(iter(sorted(filtered.not_candidate.items())), None)
            because = f" (first, {first_filtered[0]}: {first_filtered[1].message})" if first_filtered else ""
            return [Feasibility(NOT_FEASIBLE, f"no InferenceCluster passes the cluster selectors{because}")] * count
        nevers = st.hooks["never"]
        never: dict[str, Reason] = {}
        feasible: list[ClusterView] = []
        for c in candidates:
            cannot = next((why for b in nevers if (why := b.never(c)) is not None), None)
            refusal = reasons.get(c.name)
            if cannot is None and refusal is not None and refusal.kind == NEVER:
                cannot = refusal
            if cannot is None:
                feasible.append(c)
            else:
                never[c.name] = cannot
        if not feasible:
            first, why = sorted(never.items())[0]
            text = (f"no pool of the {counted(len(candidates), 'cluster')} the selectors match could ever hold it, "
                    f"at any size (first, {first}: {why.message})")
            return [Feasibility(NOT_FEASIBLE, text)] * count
        names = _policy_names(st.bindings)
        blocked: dict[str, str] = {}
        scalable: list[ClusterView] = []
        for c in feasible:
            reason = reasons.get(c.name)
            if reason is not None and reason.kind == POLICY:
                blocked[c.name] = names.get(reason.plugin) or reason.plugin or reason.code
            else:
                scalable.append(c)
        hypo = Trial(self.ledger)
        left = {b: self.book.rules[b].max_devices - self.book.used[b] for b in budgets}
        heap: list[tuple[int, str]] = []
        plans: dict[str, Plan] = {}
        grown: dict[str, dict[str, int]] = {}
        for c in scalable:
            nodes = self._nodes_for(st, c, hook_keys)
            if nodes is not None:
                heap.append((nodes, c.name))
        heapq.heapify(heap)
        out: list[Feasibility] = []
        for _ in range(count):
            if not heap:
                by_policy: dict[str, list[str]] = {}
                for blocked_name, policy in sorted(blocked.items()):
                    by_policy.setdefault(policy, []).append(blocked_name)
                policies = "; ".join(f"{p} ({_some(cs)})" for p, cs in sorted(by_policy.items()))
                out.append(Feasibility(BLOCKED, f"every cluster that could hold it refuses it by policy: {policies}"
                                       if policies else "no cluster can grow to hold it"))
                continue
            nodes, name = heap[0]
            c = cycle.clusters[name]
            plan = plans.get(name) or self._plan(st, c, hypo, grown.get(name, {}))
            assert plan is not None and plan.nodes == nodes
            costs = self.book.costs(budgets, st.shape, c, plan.engines)
            over = next((b for b, cost in costs.items() if cost and cost > left[b]), None)
            if over is not None:
                rule = self.book.rules[over]
                needs = counted(costs[over], "device")
                out.append(Feasibility(BLOCKED, f"FleetBudget {over}: a replica needs {needs}, "
                                                f"{max(0, left[over])} of {rule.max_devices} left"))
                continue
            if nodes == 0 and name not in grown:
                refused = reasons.get(name)
                out.append(Feasibility(BLOCKED, f"{name} has room but refuses: "
                                                f"{refused.message if refused is not None else 'refused'}"))
                continue
            added = grown.setdefault(name, {})
            for p, n in plan.pools.items():
                added[p] = added.get(p, 0) + n
            touched = {p: n for p, n in sorted(added.items()) if n}
            out.append(Feasibility(FITS_AFTER_SCALE_UP, self._message(name, touched, after_others=len(out) > 0),
                                   name, touched))
            for budget, cost in costs.items():
                left[budget] -= cost
            plan.trial.commit()
            fresh = self._plan(st, c, hypo, grown.get(name, {}))
            if fresh is None:
                heapq.heappop(heap)
            else:
                plans[name] = fresh
                heapq.heapreplace(heap, (fresh.nodes, name))
        return out


def _until_feasibility(fleet: Fleet, accounting: str) -> Cycle:
    cycle = pipeline.start(fleet, Matcher(SelectorCache()), accounting, None, None, {},
                           registry=plugins.REGISTRY, explain=EVERY_DEPLOYMENT)
    for stage in pipeline.STAGES:
        if stage.name == "feasibility":
            return cycle
        stage.run(cycle)
    raise AssertionError("no feasibility stage")


# ------------------------------------------------------------------------- tests

@pytest.mark.parametrize("accounting", ["Device", "Node"])
@pytest.mark.parametrize("name", FLEETS + EXAMPLES)
def test_the_summary_and_verdicts_by_class_are_those_cluster_by_cluster(name: str, accounting: str) -> None:
    fleet = _fleet(name)
    cycle = _until_feasibility(fleet, accounting)
    by_class = Assessor(cycle, cycle.ledger, book(cycle), pool_sizes(cycle.fleet.clusters, cycle.observed))
    oracle = OldAssessor(cycle, cycle.ledger, book(cycle), pool_sizes(cycle.fleet.clusters, cycle.observed))
    short = 0
    for st in cycle.deployments:
        if not st.unplaced or st.shape.invalid:
            continue
        short += 1
        refusals = st.unplaced[0].refusals
        assert refusals.by_cluster is not None and len(refusals.by_cluster) == len(cycle.clusters)
        assert summarize(refusals.by_cluster) == refusals, st.name
        want = oracle.old_verdicts(st, len(st.unplaced), refusals.by_cluster)
        assert [u.feasibility for u in by_class.assess(st)] == want, st.name
    pipeline.release(cycle)
    if name in FLEETS:
        assert short, f"{name}: a fleet meant to run short placed everything"


@pytest.mark.parametrize("name", FLEETS)
def test_explaining_changes_no_placement_and_no_summary(name: str) -> None:
    fleet = _fleet(name)
    plain, explained = place_fleet(fleet), place_fleet(fleet, explain=EVERY_DEPLOYMENT)
    assert plain.to_json_text() == explained.to_json_text()
    for d in plain.deployments:
        assert all(u.refusals.by_cluster is None for u in d.unplaced)


# -------------------------------------------------------------- the summary itself

def _reason(code: str, plugin: str, message: str, kind: str = "capacity") -> Reason:
    return Reason(code, plugin, message, kind)  # type: ignore[arg-type]


SHORT = {f"c-{i:02d}": _reason("InsufficientCapacity", "device-fit", f"engine main: short by {1 + i % 2} devices")
         for i in range(6)} | {"a-pinned": _reason("ClusterSelectorMismatch", "selectors",
                                                    "clusterSelector does not match: needs region=eu", "never"),
                               "z-drained": _reason("UntoleratedTaint", "taints", "untolerated taint drain", "policy")}


def test_a_group_counts_its_clusters_and_names_the_first_three_with_their_own_reasons() -> None:
    refusals = summarize(SHORT)
    assert refusals.clusters == 8
    assert [(g.code, g.count, [n for n, _ in g.examples]) for g in refusals.groups] == [
        ("ClusterSelectorMismatch", 1, ["a-pinned"]),
        ("InsufficientCapacity", 6, ["c-00", "c-01", "c-02"]),
        ("UntoleratedTaint", 1, ["z-drained"])]
    assert [why.message for _, why in refusals.groups[1].examples] == [
        "engine main: short by 1 devices", "engine main: short by 2 devices", "engine main: short by 1 devices"]
    assert refusals.every() is None and refusals.reason("c-01") == SHORT["c-01"] and refusals.reason("c-05") is None
    assert summarize(SHORT, keep=True).every() == SHORT


def test_the_lines_name_a_small_group_whole_and_a_large_one_by_examples() -> None:
    assert refusal_lines(summarize(SHORT)) == [          # in the order of the clusters they stand for
        "a-pinned: clusterSelector does not match: needs region=eu",
        "6 clusters (device-fit InsufficientCapacity), e.g. c-00: engine main: short by 1 devices; "
        "c-01: engine main: short by 2 devices; c-02: engine main: short by 1 devices",
        "z-drained: untolerated taint drain"]
    alike = {f"c-{i}": _reason("NoPoolFits", "device-fit", "no pool for engine main", "never") for i in range(5)}
    assert refusal_lines(summarize(alike)) == [
        "5 clusters (device-fit NoPoolFits), e.g. c-0, c-1, c-2: no pool for engine main"]


def test_a_summary_reads_back_from_its_json_and_an_old_map_of_messages_reads_as_one() -> None:
    refusals = summarize(SHORT)
    back = Refusals.from_json(json.loads(json.dumps(refusals.to_json())), ())
    assert back == refusals and back.to_json() == refusals.to_json()
    old = Refusals.from_messages({"b": "short", "a": "short", "c": "tainted"})
    assert [(g.count, [n for n, _ in g.examples], g.code) for g in old.groups] == [
        (2, ["a", "b"], RECORDED), (1, ["c"], RECORDED)]
    assert refusal_lines(old) == ["a: short", "b: short", "c: tainted"]


def _doc(**group: object) -> dict[str, object]:
    base: dict[str, object] = {"plugin": "device-fit", "code": "InsufficientCapacity", "kind": "capacity",
                               "clusters": 1, "examples": {"a": "short"}}
    return {"clusters": group.pop("total", 1), "groups": [{**base, **group}]}


@pytest.mark.parametrize(("doc", "error"), [
    (_doc(kind="maybe"), r"\$\.groups\[0\]\.kind: expected one of policy, capacity, never, got 'maybe'"),
    (_doc(examples={}), r"\$\.groups\[0\]\.examples: expected 1 to 3 clusters"),
    (_doc(examples={c: "x" for c in "abcd"}, clusters=4, total=4), r"expected 1 to 3 clusters"),
    (_doc(examples={"a": 1}), r"\$\.groups\[0\]\.examples: expected an object of strings"),
    (_doc(clusters=0, total=0), r"\$\.groups\[0\]\.clusters: fewer than the 1 examples"),
    (_doc(clusters=10**70, total=10**70), r"clusters: expected a whole number from 0 to 1000000000, got a 71-digit"),
    (_doc(total=2), r"\$\.clusters: 2, but its groups hold 1"),
    (_doc(clusters=True), r"clusters: expected an integer, got a boolean"),
    ({"clusters": 1}, r"\$: missing 'groups'"),
], ids=["kind", "no-example", "four-examples", "not-words", "fewer-than-named", "huge", "total", "bool", "groups"])
def test_a_malformed_summary_is_refused_naming_its_path(doc: dict[str, object], error: str) -> None:
    with pytest.raises(PlacementFormatError, match=error):
        Refusals.from_json(doc, ())  # type: ignore[arg-type]


def test_a_document_with_both_forms_of_refusals_is_refused() -> None:
    doc = {"deployments": [{"namespace": "d", "name": "m", "unplaced": [
        {"index": 0, "reasons": {"a": "short"}, "refusals": _doc()}]}]}
    with pytest.raises(PlacementFormatError, match=r"unplaced\[0\]: one of 'reasonsOf', 'refusals' and 'reasons'"):
        FleetPlacement.from_json(doc)
