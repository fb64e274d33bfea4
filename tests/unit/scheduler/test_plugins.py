"""Each plugin of the cycle alone, through its hooks: named cases, a table per plugin.

A case compiles a small fleet into a cycle (pipeline.start), takes one deployment's
binding of the plugin under test and calls the hook directly, so a plugin is held to its
rule without the rest of the pipeline deciding the outcome.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from modelplane.api import load_documents
from modelplane.scheduler import Outage, pipeline
from modelplane.scheduler import reasons as codes
from modelplane.scheduler.cycle import Binding, Cycle, DeploymentState, Keeping, Reservation
from modelplane.scheduler.ledger import Trial
from modelplane.scheduler.matching import Matcher
from modelplane.scheduler.placement_types import PlacedReplica
from modelplane.scheduler.plugins import REGISTRY
from modelplane.scheduler.plugins.budgets import Budgets
from modelplane.scheduler.plugins.cache_staging import CacheStaging
from modelplane.scheduler.plugins.device_fit import DeviceFit
from modelplane.scheduler.plugins.outages import Outages
from modelplane.scheduler.plugins.selectors import Selectors
from modelplane.scheduler.plugins.spread import Spread
from modelplane.scheduler.plugins.spread_before_pack import SkipList, SpreadBeforePack
from modelplane.scheduler.plugins.taints import Taints
from modelplane.scheduler.plugins.tiers import Tiers

from .helpers import (
    H100,
    cluster,
    deployment,
    engine,
    fleet_budget,
    gpu_class,
    model_cache,
    placement_policy,
    pool,
    preferences,
    spread,
    standalone,
    taint,
    tier,
)


def cycle_of(docs: list[dict], accounting: str = "Node", outages: dict[str, Outage] | None = None) -> Cycle:
    fleet = load_documents(docs)
    cycle = pipeline.start(fleet, Matcher(), accounting, None, None, outages or {}, registry=REGISTRY)
    return cycle


def state(cycle: Cycle, name: str = "m") -> DeploymentState:
    return next(st for st in cycle.deployments if st.shape.name == name)


def binding(cycle: Cycle, plugin: type[Binding], name: str = "m") -> Any:
    return next((b for b in state(cycle, name).bindings if isinstance(b, plugin)), None)


def ledger_ready(cycle: Cycle) -> Cycle:
    """Run the stages before fill, so the ledger holds the pools."""
    for stage in pipeline.STAGES:
        if stage.name == "fill":
            break
        stage.run(cycle)
    return cycle


def existing(name: str, storage: str | None, *pools: dict, labels: dict | None = None) -> dict:
    doc = cluster(name, *pools, labels=labels)
    doc["spec"]["cluster"] = {"source": "Existing", "existing": {"cache": {"storageClassName": storage}}
                              if storage else {}}
    return doc


@dataclass
class FilterCase:
    name: str
    docs: list[dict]
    plugin: type[Binding]
    # cluster -> (code, kind, message) of the refusal, or None when the filter lets it through
    want: dict[str, tuple[str, str, str] | None]
    outages: dict[str, Outage] = field(default_factory=dict)

    def __str__(self) -> str:
        return self.name


FILTER_CASES = [
    FilterCase("selectors: a label missing or different refuses, a match passes",
               [H100, cluster("eu", pool("p", "h100"), labels={"region": "eu"}),
                cluster("us", pool("p", "h100"), labels={"region": "us"}), cluster("bare", pool("p", "h100")),
                deployment("m", 1, selector={"region": "eu"})], Selectors,
               {"eu": None,
                "us": (codes.SELECTOR_MISMATCH, codes.NEVER,
                       "clusterSelector does not match: needs region=eu, cluster has region=us"),
                "bare": (codes.SELECTOR_MISMATCH, codes.NEVER,
                         "clusterSelector does not match: needs region=eu, cluster has missing")}),
    FilterCase("cache-staging: the cache's selector, then its storage",
               [H100, existing("rwx", "nfs", pool("p", "h100"), labels={"tier": "a"}),
                existing("plain", None, pool("p", "h100"), labels={"tier": "a"}),
                existing("other", "nfs", pool("p", "h100"), labels={"tier": "b"}),
                model_cache("qwen", selector={"tier": "a"}), deployment("m", 1, cache="qwen")], CacheStaging,
               {"rwx": None,
                "other": (codes.CACHE_SELECTOR_MISMATCH, codes.NEVER,
                          "the ModelCache's clusterSelector does not match: needs tier=a, cluster has tier=b"),
                "plain": (codes.CACHE_NOT_STAGEABLE, codes.NEVER,
                          "a ModelCache cannot be staged on this cluster: ")}),
    FilterCase("outages: a cluster in an outage takes no new replica",
               [H100, cluster("a", pool("p", "h100")), cluster("b", pool("p", "h100")), deployment("m", 1)], Outages,
               {"a": (codes.CLUSTER_UNAVAILABLE, codes.POLICY, "cluster unavailable: unreachable"), "b": None},
               {"a": Outage("unreachable")}),
    FilterCase("taints: NoSchedule and NoExecute keep new replicas off unless tolerated",
               [H100, cluster("ns", pool("p", "h100"), taints=[taint("maint")]),
                cluster("ne", pool("p", "h100"), taints=[taint("drain", "NoExecute")]),
                cluster("ok", pool("p", "h100")),
                deployment("m", 1, tolerations=[{"key": "drain", "operator": "Exists"}])], Taints,
               {"ns": (codes.UNTOLERATED_TAINT, codes.POLICY, "untolerated taint maint:NoSchedule"),
                "ne": None, "ok": None}),
    FilterCase("tiers: a cluster in no tier takes no new replica",
               [H100, cluster("op", pool("p", "h100"), labels={"site": "op"}),
                cluster("x", pool("p", "h100"), labels={"site": "x"}),
                deployment("m", 1, policy=placement_policy(prefs=preferences(tier("onprem", site="op"))))], Tiers,
               {"op": None,
                "x": (codes.NOT_IN_ANY_TIER, codes.POLICY, "clusterPreferences: the cluster is in no tier (onprem)")}),
]


@pytest.mark.parametrize("case", FILTER_CASES, ids=str)
def test_filter(case: FilterCase) -> None:
    cycle = cycle_of(case.docs, outages=case.outages)
    b = binding(cycle, case.plugin)
    assert b is not None, f"{case.plugin.name} did not bind"
    for name, want in case.want.items():
        why = b.filter(cycle.clusters[name])
        if want is None:
            assert why is None, (name, why)
        else:
            assert why is not None and why.code == want[0] and why.plugin == case.plugin.name, (name, why)
            assert why.kind == want[1] and why.message.startswith(want[2]), (name, why)


@pytest.mark.parametrize("plugin, docs", [
    (Selectors, [H100, cluster("a", pool("p", "h100")), deployment("m")]),
    (CacheStaging, [H100, cluster("a", pool("p", "h100")), deployment("m")]),
    (Outages, [H100, cluster("a", pool("p", "h100")), deployment("m")]),
    (Tiers, [H100, cluster("a", pool("p", "h100")), deployment("m")]),
    (Spread, [H100, cluster("a", pool("p", "h100")), deployment("m")]),
    (Budgets, [H100, cluster("a", pool("p", "h100")), deployment("m")]),
], ids=lambda v: v.name if isinstance(v, type) else "")
def test_a_plugin_with_nothing_to_say_does_not_bind(plugin, docs) -> None:
    """A deployment without the rule pays nothing for it: the plugin is not in its cycle."""
    assert binding(cycle_of(docs), plugin) is None


def test_filter_answers_are_shared_by_deployments_with_equal_keys() -> None:
    cycle = cycle_of([H100, cluster("a", pool("p", "h100"), labels={"r": "x"}), deployment("m", 1, selector={"r": "x"}),
                      deployment("n", 1, selector={"r": "x"}), deployment("o", 1, selector={"r": "y"})])
    m, n, o = (cycle.filtered(state(cycle, d)) for d in "mno")
    assert m is n and m is not o
    assert m.open == ["a"] and o.open == [] and o.not_candidate["a"].code == codes.SELECTOR_MISMATCH


# -- keep (retain) ------------------------------------------------------------------

def _kept(cycle: Cycle, cluster_name: str, pool_name: str = "p") -> Keeping:
    from modelplane.scheduler.placement_types import EnginePlacement

    rep = PlacedReplica("m-1", 0, cluster_name, {"main": EnginePlacement(pool_name, (pool_name,))})
    return Keeping(rep, cycle.clusters[cluster_name], 0)


def test_keep_taints_evict_only_on_no_execute() -> None:
    cycle = cycle_of([H100, cluster("ns", pool("p", "h100"), taints=[taint("maint")]),
                      cluster("ne", pool("p", "h100"), taints=[taint("maint", "NoExecute")]), deployment("m")])
    b = binding(cycle, Taints)
    assert b.keep(_kept(cycle, "ns")) is None
    why = b.keep(_kept(cycle, "ne"))
    assert why is not None and why.code == codes.EVICTED
    assert why.message == "evicted by untolerated taint maint:NoExecute"


@pytest.mark.parametrize("name, pool_name, want", [
    ("pins still match: kept, charged its current cost", "p", None),
    ("pool gone", "gone", (codes.PINS_CHANGED, "engine main: pool gone is gone")),
    ("pool of a class that no longer matches", "small", (codes.PINS_CHANGED, "engine main: member 0 (Standalone) no "
                                                                             "longer matches pool small")),
])
def test_keep_device_fit_re_resolves_the_pins(name, pool_name, want) -> None:
    cycle = cycle_of([H100, gpu_class("l4", 1, "23034Mi"), cluster("a", pool("p", "h100"), pool("small", "l4")),
                      deployment("m")])
    kept = _kept(cycle, "a", pool_name)
    why = binding(cycle, DeviceFit).keep(kept)
    if want is None:
        assert why is None and kept.engines is not None and kept.engines["main"].pool == "p"
        assert kept.charges == [("p", [(1, (1,))])]
    else:
        assert why is not None and why.code == want[0] and why.message.startswith(want[1]), why


# -- reserve, admit, score --------------------------------------------------------------

def test_device_fit_reserve_places_and_a_refusal_is_remembered_and_explained() -> None:
    cycle = ledger_ready(cycle_of([H100, cluster("a", pool("p", "h100", 1)), deployment("m", 2)], "Device"))
    fit = binding(cycle, DeviceFit)
    a = cycle.clusters["a"]
    first = Reservation(a, cycle.ledger)
    assert fit.reserve(first) is None and first.engines["main"].pool == "p"
    assert not fit.refuses_already(a)
    second = Reservation(a, cycle.ledger)
    why = fit.reserve(second)
    assert why is not None and why.code == codes.INSUFFICIENT_CAPACITY and why.plugin == "device-fit"
    assert why.message == "engine main: short by 1 device in pool p" and why.kind == codes.CAPACITY
    assert fit.refuses_already(a)
    assert fit.explain(a) == why                       # the words, without trying again


def test_device_fit_says_when_no_pool_fits_at_any_size() -> None:
    cycle = ledger_ready(cycle_of([H100, cluster("a", pool("p", "h100", 4)),
                                   deployment("m", 1, engine("main", standalone(gpus=2)))]))
    why = binding(cycle, DeviceFit).reserve(Reservation(cycle.clusters["a"], Trial(cycle.ledger)))
    assert why is not None and why.code == codes.NO_POOL_FITS and why.kind == codes.NEVER
    assert why.message.startswith("no pool for engine main: pool p: member 0 (Standalone) request 'gpu' "
                                  "matched too few")


def test_budgets_reserve_charges_refuses_and_unreserve_refunds() -> None:
    cycle = ledger_ready(cycle_of([H100, cluster("a", pool("p", "h100", 4)), deployment("m", 3, namespace="ml"),
                                   fleet_budget("ml", 2, namespaces=["ml"])]))
    b = binding(cycle, Budgets)
    fit = binding(cycle, DeviceFit)
    r = Reservation(cycle.clusters["a"], Trial(cycle.ledger))
    assert fit.reserve(r) is None
    assert b.reserve(r) is None and b.book.used == {"ml": 1}
    b.unreserve(r)
    assert b.book.used == {"ml": 0}
    b.book.used["ml"] = 2
    why = b.reserve(r)
    assert why is not None and why.code == codes.BUDGET_EXCEEDED and why.plugin == "budgets"
    assert why.message == "FleetBudget ml: a replica needs 1 device, 0 of 2 left" and why.kind == codes.CAPACITY


def test_spread_admit_score_and_reserve() -> None:
    docs = [H100] + [cluster(f"{r}{i}", pool("p", "h100", 4), labels={"region": r}) for r in "ab" for i in (1, 2)]
    docs.append(deployment("m", 3, policy=placement_policy(spread("region", 2, per_group=2))))
    cycle = ledger_ready(cycle_of(docs))
    s = binding(cycle, Spread)
    s.begin()
    a1, a2, b1 = (cycle.clusters[n] for n in ("a1", "a2", "b1"))
    assert s.score(a1) == s.score(b1) == 0              # minGroups unmet: every group is new
    s.reserve(Reservation(a1, cycle.ledger))
    assert s.rescore_all()                              # a group opened: every score may move
    assert (s.score(a2), s.score(b1)) == (1, 0)         # now region b comes first
    why = s.admit(a2, remaining=1)                      # the last replica must open region b
    assert why is not None and why.code == codes.SPREAD_CONSTRAINT and why.kind == codes.POLICY
    assert why.message == "spread region: the last 1 replica(s) must each open a new group to reach minGroups 2 (in 1)"
    s.reserve(Reservation(a2, cycle.ledger))
    assert s.admit(cycle.clusters["a1"], remaining=5).message == ("spread region: group a already has 2 replica(s) "
                                                                  "(maxReplicasPerGroup 2)")
    s.unreserve(Reservation(a2, cycle.ledger))
    assert s.admit(a2, remaining=5) is None


def test_spread_admit_move_refuses_a_move_that_leaves_the_rules_further_off() -> None:
    docs = [H100] + [cluster(f"{r}{i}", pool("p", "h100", 4), labels={"region": r}) for r in "ab" for i in (1, 2)]
    docs.append(deployment("m", 2, policy=placement_policy(spread("region", 2))))
    cycle = ledger_ready(cycle_of(docs))
    s = binding(cycle, Spread)
    s.begin()
    s.reserve(Reservation(cycle.clusters["a1"], cycle.ledger))
    s.reserve(Reservation(cycle.clusters["b1"], cycle.ledger))
    on_b = PlacedReplica("m-b", 0, "b1", {})
    assert s.admit_move(on_b, cycle.clusters["b2"]) is None         # b to b: still two groups
    why = s.admit_move(on_b, cycle.clusters["a2"])                  # b to a: one group, minGroups 2
    assert why is not None and (why.code, why.kind) == (codes.SPREAD_CONSTRAINT, codes.POLICY)
    assert why.message == "moving m-b to a2 would break a spread constraint"


def test_tiers_score_is_the_tier_rank() -> None:
    docs = [H100, cluster("op", pool("p", "h100"), labels={"site": "op"}),
            cluster("cl", pool("p", "h100"), labels={"site": "cl"}),
            deployment("m", 1, policy=placement_policy(prefs=preferences(tier("onprem", site="op"),
                                                                         tier("cloud", site="cl"))))]
    cycle = cycle_of(docs)
    t = binding(cycle, Tiers)
    assert (t.score(cycle.clusters["op"]), t.score(cycle.clusters["cl"])) == (0, 1)


def test_spread_before_pack_scores_replicas_of_the_deployment_on_the_cluster() -> None:
    cycle = ledger_ready(cycle_of([H100, cluster("a", pool("p", "h100", 4)), cluster("b", pool("p", "h100", 4)),
                                   deployment("m", 3)]))
    from modelplane.scheduler.fill import reserve

    base, st = binding(cycle, SpreadBeforePack), state(cycle)
    a, b = cycle.clusters["a"], cycle.clusters["b"]
    assert (base.score(a), base.score(b)) == (0, 0)
    reserve(cycle, st, a)
    reserve(cycle, st, a)
    assert (base.score(a), base.score(b)) == (2, 0)
    assert [(r.cluster, r.index) for r in st.placed] == [("a", 0), ("a", 1)]


@pytest.mark.parametrize("name, refused, start, want", [
    ("nothing refused: the position itself", set(), 0, 0),
    ("a run of refusals is stepped over", {"c0", "c1", "c2"}, 0, 3),
    ("from the middle", {"c3"}, 3, 4),
    ("everything refused: the end", {f"c{i}" for i in range(6)}, 0, 6),
])
def test_skip_list(name, refused, start, want) -> None:
    skips = SkipList([f"c{i}" for i in range(6)])
    asked: list[str] = []

    def refuses(c: str) -> bool:
        asked.append(c)
        return c in refused

    assert skips.find(start, refuses) == want
    again = len(asked)
    assert skips.find(start, refuses) == want
    assert len(asked) - again <= 1                       # refusals found once are not asked again


def test_the_registry_orders_candidate_filters_first_and_device_fit_before_budgets() -> None:
    names = [p.name for p in REGISTRY]
    assert names == ["selectors", "cache-staging", "outages", "taints", "tiers", "spread", "device-fit", "gang-zones",
                     "budgets",
                     "spread-before-pack"]
    assert all(p.candidate for p in REGISTRY[:2]) and not any(p.candidate for p in REGISTRY[2:])
