"""Properties of the placement policies (issue 14) over random fleets (hypothesis):

* a plan never exceeds a FleetBudget, fresh or re-planned, moves included, and the
  budget status reports what the output really claims;
* a deployment reported SpreadSatisfied=True really satisfies every spread rule;
* a move never lowers the ready replicas below min(ready before, spec.replicas);
* 20 repeated plans with unchanged inputs converge and never flap (a replica removed
  never comes back);
* a budget that never binds changes nothing."""

from __future__ import annotations

import copy
from collections import Counter, defaultdict

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from modelplane.api import load_documents
from modelplane.scheduler import FleetPlacement, place_fleet
from modelplane.scheduler.matching import Matcher, MemberMatch
from modelplane.scheduler.reasons import MOVED_BACK
from modelplane.scheduler.shape import compile_clusters, compile_deployment
from modelplane.vocabulary import CLUSTER_NAME_KEY
from tests.manifests import (
    cluster,
    deployment,
    engine,
    fleet_budget,
    placement_policy,
    pool,
    preferences,
    previous_from,
    spread,
    standalone,
    tier,
)

from .fleets import CLASSES, REGIONS, clusters, deployments

SETTINGS = settings(max_examples=60, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
MODES = st.sampled_from(["Node", "Device"])
TEAMS = ("search", "chat")


@st.composite
def policies(draw, moving: bool = False) -> dict | None:
    """Random spread rules and tiers; `moving`: always tiers, us before eu, moves allowed
    (with an outage of us in the first plan, replicas have somewhere to return to)."""
    rules = []
    if draw(st.booleans()):
        key = draw(st.sampled_from(["region", CLUSTER_NAME_KEY]))
        lo = draw(st.sampled_from([1, 1, 2, 2, 3]))
        hi = draw(st.sampled_from([None, lo, lo + 1]))
        rules.append(spread(key, lo, hi, draw(st.sampled_from([None, 1, 2, 3]))))
    prefs = None
    if moving or draw(st.integers(0, 3)) > 0:
        first, second = REGIONS if moving else draw(st.permutations(REGIONS))
        tiers = [tier("first", region=first), tier("second", region=second)][: 2 if moving else draw(st.integers(1, 2))]
        prefs = preferences(*tiers, return_after=draw(st.integers(1, 3)),
                            max_moves=draw(st.sampled_from([1, 2] if moving else [0, 1, 1, 2])))
    return placement_policy(*rules, prefs=prefs) if rules or prefs else None


@st.composite
def two_region_clusters(draw) -> list[dict]:
    """2-5 clusters, both regions present, mostly GPU pools: room to overflow and return."""
    out = []
    for i in range(draw(st.integers(2, 5))):
        pools = [pool(f"p{j}", draw(st.sampled_from(["g1", "g2", "g8", "l4"])), draw(st.integers(0, 4)))
                 for j in range(draw(st.integers(1, 2)))]
        taints = [{"key": "maint", "effect": "NoSchedule"}] if draw(st.integers(0, 6)) == 0 else None
        region = REGIONS[i % 2] if i < 2 else draw(st.sampled_from(REGIONS))
        out.append(cluster(f"c{i}", *pools, labels={"region": region}, taints=taints))
    return out


@st.composite
def small_deployments(draw) -> list[dict]:
    """Standalone engines of 1 or 2 GPUs: they place often, so policies have work."""
    out = []
    for i in range(draw(st.integers(1, 4))):
        gpus = draw(st.sampled_from([1, 1, 2]))
        main = engine("main", standalone(gpus, draw(st.sampled_from([16, 40]))), copies=draw(st.integers(1, 2)))
        out.append(deployment(f"s{i}", draw(st.integers(0, 5)), main))
    return out


@st.composite
def policy_fleets(draw, moving: bool = False) -> list[dict]:
    deps = draw(deployments((0, 2))) + draw(small_deployments())
    for d in deps:
        d["metadata"]["namespace"] = draw(st.sampled_from(["ml", "web"]))
        d["metadata"]["labels"] = {"team": draw(st.sampled_from(TEAMS))}
        policy = draw(policies(moving and d["metadata"]["name"].startswith("s")))
        if policy is not None:
            d["spec"]["placementPolicy"] = policy
    budgets = []
    for i in range(draw(st.integers(0, 2))):
        scope = draw(st.sampled_from(["namespace", "label", "fleet"]))
        budgets.append(fleet_budget(f"b{i}", draw(st.integers(0, 40)),
                                    namespaces=["ml"] if scope == "namespace" else None,
                                    selector={"team": "search"} if scope == "label" else None,
                                    classes=draw(st.sampled_from([None, ["gpu.nvidia.com"]]))))
    fleet_clusters = draw(st.one_of(clusters(), two_region_clusters(), two_region_clusters()))
    return [*CLASSES.values(), *fleet_clusters, *deps, *budgets]


def load(docs):
    return load_documents(copy.deepcopy(docs))


def replan(docs, previous: FleetPlacement | None, accounting: str, not_ready: frozenset[str] = frozenset(),
           observed: dict | None = None):
    prev = previous_from(previous, not_ready) if previous is not None else None
    return place_fleet(load(docs), previous=prev, accounting=accounting, observed=observed)


def outage(docs: list[dict], region: str = REGIONS[0]) -> dict:
    """Observed sizes with one region's pools at 0 nodes: the first plan overflows to
    less preferred tiers, and the plans after it (declared sizes) find room to return."""
    return {d["metadata"]["name"]: {p["name"]: 0 for p in d["spec"]["nodePools"]} for d in docs
            if d["kind"] == "InferenceCluster" and d["metadata"]["labels"]["region"] == region}


def devices_used(docs, fp: FleetPlacement) -> dict[str, int]:
    """Per FleetBudget, the DRA devices the output claims, recomputed from the replicas."""
    fleet = load(docs)
    matcher = Matcher()
    views = compile_clusters(fleet)
    used: dict[str, int] = defaultdict(int)
    for name, budget in fleet.budgets.items():
        classes = set(budget.spec.device_class_names)
        for dp in fp.deployments:
            dep = fleet.deployments[(dp.namespace, dp.name)]
            if not budget.selects(dp.namespace, dict(dep.metadata.labels)):
                continue
            shape = compile_deployment(fleet, (dp.namespace, dp.name), dep)
            for r in dp.replicas:
                for e in shape.engines:
                    pools = r.engines[e.name].pools_for(len(e.members))
                    for m, p in zip(e.members, pools, strict=True):
                        match = matcher.match(m, views[r.cluster].pool(p).cls)
                        if isinstance(match, MemberMatch):
                            used[name] += m.pod_count * sum(q.count for q in match.resolved
                                                            if not classes or q.device_class_name in classes)
    return used


def assert_within_budgets(docs, fp: FleetPlacement) -> None:
    used = devices_used(docs, fp)
    for b in fp.budgets:
        assert used[b.name] <= b.max_devices, f"budget {b.name}: {used[b.name]} > {b.max_devices}"
        assert used[b.name] == b.used, f"budget {b.name} reports {b.used}, output claims {used[b.name]}"


def assert_spread_when_satisfied(docs, fp: FleetPlacement) -> None:
    by_name = {d["metadata"]["name"]: d for d in docs if d["kind"] == "InferenceCluster"}
    specs = {(d["metadata"]["namespace"], d["metadata"]["name"]): d for d in docs if d["kind"] == "ModelDeployment"}
    for dp in fp.deployments:
        c = dp.condition("SpreadSatisfied")
        if c is None or c.status != "True" or c.reason == "ScaledToZero":
            continue
        for rule in specs[(dp.namespace, dp.name)]["spec"]["placementPolicy"]["spreadConstraints"]:
            key = rule["topologyKey"]
            groups = Counter()
            for r in dp.replicas:
                labels = by_name[r.cluster]["metadata"].get("labels") or {}
                group = r.cluster if key == CLUSTER_NAME_KEY else labels.get(key)
                assert group is not None, f"{dp.name}: {r.name} in no {key} group but SpreadSatisfied"
                groups[group] += 1
            assert len(groups) >= rule.get("minGroups", 1), (dp.name, groups, rule)
            assert rule.get("maxGroups") is None or len(groups) <= rule["maxGroups"], (dp.name, groups, rule)
            cap = rule.get("maxReplicasPerGroup")
            assert cap is None or max(groups.values(), default=0) <= cap, (dp.name, groups, rule)


@SETTINGS
@given(docs=policy_fleets(), accounting=MODES)
def test_fresh_plans_respect_budgets_and_reported_spread(docs, accounting) -> None:
    fp = replan(docs, None, accounting)
    assert_within_budgets(docs, fp)
    assert_spread_when_satisfied(docs, fp)


@SETTINGS
@given(docs=policy_fleets(), later=policy_fleets(), accounting=MODES, data=st.data())
def test_replans_after_any_change_respect_budgets(docs, later, accounting, data) -> None:
    """Plan one fleet, then plan another (other budgets, policies, capacity) from it."""
    first = replan(docs, None, accounting)
    names = sorted(r.name for d in first.deployments for r in d.replicas)
    not_ready = frozenset(data.draw(st.sets(st.sampled_from(names))) if names else ())
    fp = replan(later, first, accounting, not_ready)
    assert_within_budgets(later, fp)
    assert_spread_when_satisfied(later, fp)


def ready(fp: FleetPlacement, not_ready: frozenset[str]) -> dict[tuple[str, str], set[str]]:
    return {(d.namespace, d.name): {r.name for r in d.replicas if r.name not in not_ready} for d in fp.deployments}


@SETTINGS
@given(docs=policy_fleets(moving=True), accounting=MODES, data=st.data())
def test_a_move_never_lowers_ready_replicas(docs, accounting, data) -> None:
    fp = replan(docs, None, accounting, observed=outage(docs))
    for _ in range(8):
        names = sorted(r.name for d in fp.deployments for r in d.replicas)
        not_ready = frozenset(data.draw(st.lists(st.sampled_from(names), max_size=2)) if names else ())
        before = ready(fp, not_ready)
        nxt = replan(docs, fp, accounting, not_ready)
        for d in nxt.deployments:
            was_ready = before[(d.namespace, d.name)]
            now = {r.name for r in d.replicas}
            completed = 0
            for old, why in d.dropped:
                assert why.code == MOVED_BACK, f"unchanged inputs dropped {old.name}: {why}"
                new = why.message.split(": ")[1].split(" on ")[0]     # "moved back to tier T: NEW on C is ready"
                assert new in was_ready and new in now, f"{old.name} dropped before {new} was ready"
                completed += 1
                event("a move completed")
            # both halves of a completed move were ready and count as one replica
            kept_ready = was_ready & now
            assert len(kept_ready) >= min(len(was_ready) - completed, d.desired), (
                d.name, sorted(was_ready), sorted(now), d.dropped)
        assert_within_budgets(docs, nxt)
        fp = nxt


@settings(SETTINGS, max_examples=100)
@given(docs=policy_fleets(moving=True), accounting=MODES)
def test_no_flapping_over_20_plans(docs, accounting) -> None:
    """After an outage plan (some clusters observed empty), 20 plans with unchanged
    inputs: replicas move back to their preferred tiers, then nothing changes."""
    def snapshot(fp: FleetPlacement) -> dict[tuple[str, str], set[tuple[str, int]]]:
        return {(d.namespace, d.name): {(r.cluster, r.index) for r in d.replicas} for d in fp.deployments}

    fp = replan(docs, None, accounting, observed=outage(docs))
    history = [snapshot(fp)]
    for _ in range(20):
        fp = replan(docs, fp, accounting)
        assert_within_budgets(docs, fp)
        history.append(snapshot(fp))
    assert history[-1] == history[-2] == history[-3], "placement still changing after 20 plans"
    for dep in history[0]:
        seen_gone: set[tuple[str, int]] = set()
        for k in range(1, len(history)):
            gone = history[k - 1][dep] - history[k][dep]
            if gone:
                event("replicas moved back")
            back = history[k][dep] & seen_gone
            assert not back, f"{dep}: {back} removed then placed again (flapping)"
            seen_gone |= gone


@SETTINGS
@given(docs=policy_fleets(), accounting=MODES)
def test_a_budget_that_never_binds_changes_nothing(docs, accounting) -> None:
    """Every deployment comes under a huge budget, so under the policy fill: it must
    place exactly as the base fill (or its own policies) did without it."""
    base = [d for d in docs if d["kind"] != "FleetBudget"]
    loose = [*base, fleet_budget("loose", 1_000_000)]

    def placed(fp: FleetPlacement) -> list:
        return [(d.name, [r.to_json() for r in d.replicas], [u.index for u in d.unplaced]) for d in fp.deployments]

    assert placed(replan(loose, None, accounting)) == placed(replan(base, None, accounting))
