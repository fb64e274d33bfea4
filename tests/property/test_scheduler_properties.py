"""Properties of the scheduler over random fleets (hypothesis).

Fresh plans (no previous placement) must never overcommit; every plan must be
deterministic; a kept replica never moves; spread holds; in Node accounting the
reference's rules (§2) hold, checked against the final ledger and the output."""

from __future__ import annotations

import copy
import json
from collections import Counter, defaultdict

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from modelplane.api import load_documents
from modelplane.naming import replica_name
from modelplane.scheduler import FleetPlacement, place_fleet, place_fleet_with_ledger
from modelplane.scheduler.ledger import DevicePool, NodePool
from modelplane.scheduler.matching import Matcher, MemberMatch
from modelplane.scheduler.shape import compile_clusters, compile_deployment

from .fleets import CLASSES, fleets

SETTINGS = settings(max_examples=100, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
MODES = st.sampled_from(["Node", "Device"])


def load(docs):
    return load_documents(copy.deepcopy(docs))


def kind(docs, k):
    return [d for d in docs if d["kind"] == k]


def candidate(dep: dict, clus: dict) -> bool:
    sel = (dep["spec"]["template"]["spec"].get("clusterSelector") or {}).get("matchLabels") or {}
    labels = clus["metadata"].get("labels") or {}
    return all(labels.get(k) == v for k, v in sel.items())


def tolerated(dep: dict, clus: dict, effects: tuple[str, ...]) -> bool:
    tols = dep["spec"]["template"]["spec"].get("tolerations") or []
    taints = [t for t in clus["spec"].get("taints") or [] if t["effect"] in effects]
    return not taints or bool(tols)  # generated tolerations are {key: maint, Exists}


def usage(fleet, fp: FleetPlacement):
    """(cluster, pool) -> [nodes used, per-kind devices used], recomputed from the output."""
    matcher = Matcher()
    clusters = compile_clusters(fleet)
    used: dict = defaultdict(lambda: [0, None])
    for dp in fp.deployments:
        shape = compile_deployment(fleet, (dp.namespace, dp.name), fleet.deployments[(dp.namespace, dp.name)])
        for r in dp.replicas:
            for e in shape.engines:
                placed = r.engines[e.name]
                for m, pool_name in zip(e.members, placed.pools_for(len(e.members)), strict=True):
                    pv = clusters[r.cluster].pool(pool_name)
                    match = matcher.match(m, pv.cls)
                    assert isinstance(match, MemberMatch)
                    entry = used[(r.cluster, pool_name)]
                    if entry[1] is None:
                        entry[1] = [0] * len(pv.cls.devices)
                    if match.claims:
                        entry[0] += m.pod_count
                        for i, n in enumerate(match.per_pod):
                            entry[1][i] += n * m.pod_count
    return clusters, used


def assert_within_capacity(fleet, fp, ledger, accounting):
    clusters, used = usage(fleet, fp)
    for cname, cv in clusters.items():
        for pv in cv.pools:
            nodes_used, devs_used = used.get((cname, pv.name), [0, None])
            devs_used = devs_used or [0] * len(pv.cls.devices)
            state = ledger.state((cname, pv.name))
            if accounting == "Node":
                assert isinstance(state, NodePool)
                assert nodes_used <= pv.nodes, (cname, pv.name)
                assert state.free == pv.nodes - nodes_used
            else:
                assert isinstance(state, DevicePool)
                assert state.overdraft == 0
                assert all(min(vec) >= 0 for vec in state.groups) if state.groups else True
                assert sum(state.groups.values()) == pv.nodes
                for i, d in enumerate(pv.cls.devices):
                    free = sum(vec[i] * n for vec, n in state.groups.items())
                    assert d.count * pv.nodes - free == devs_used[i], (cname, pv.name, d.name)


@SETTINGS
@given(fleets(), MODES)
def test_fresh_plan_never_overcommits_a_pool(docs, accounting):
    fleet = load(docs)
    fp, ledger = place_fleet_with_ledger(fleet, accounting=accounting)
    assert_within_capacity(fleet, fp, ledger, accounting)


@SETTINGS
@given(fleets(), MODES)
def test_an_engine_spans_pools_only_within_one_fabric_domain(docs, accounting):
    fleet = load(docs)
    fp = place_fleet(fleet, accounting=accounting)
    views = compile_clusters(fleet)
    for dp in fp.deployments:
        for r in dp.replicas:
            for e in r.engines.values():
                assert e.pool in e.member_pools
                pools = set(e.member_pools)
                if len(pools) > 1:
                    domains = {views[r.cluster].pool(p).domain for p in pools}
                    assert len(domains) == 1 and None not in domains, (dp.name, r.cluster, e)


@SETTINGS
@given(fleets(), MODES, st.randoms(use_true_random=False))
def test_second_plan_with_previous_never_overcommits(docs, accounting, rnd):
    first = place_fleet(load(docs), accounting=accounting)
    changed = copy.deepcopy(docs)
    for d in kind(changed, "ModelDeployment"):
        d["spec"]["replicas"] = rnd.randint(0, 6)
    fleet = load(changed)
    fp, ledger = place_fleet_with_ledger(fleet, previous=first, accounting=accounting)
    assert_within_capacity(fleet, fp, ledger, accounting)


@SETTINGS
@given(fleets(), MODES, st.randoms(use_true_random=False))
def test_deterministic_byte_for_byte(docs, accounting, rnd):
    first = json.dumps(place_fleet(load(docs), accounting=accounting).to_json())
    assert json.dumps(place_fleet(load(docs), accounting=accounting).to_json()) == first
    shuffled = list(docs)
    rnd.shuffle(shuffled)
    assert json.dumps(place_fleet(load(shuffled), accounting=accounting).to_json()) == first


@SETTINGS
@given(fleets(), MODES, st.randoms(use_true_random=False))
def test_retained_replica_is_never_moved(docs, accounting, rnd):
    before = copy.deepcopy(docs)
    for d in kind(before, "ModelDeployment"):
        d["spec"]["replicas"] = rnd.randint(0, 6)
    previous = place_fleet(load(before), accounting=accounting)
    fp = place_fleet(load(docs), previous=FleetPlacement.from_json(previous.to_json()),
                     accounting=accounting)
    for dp in fp.deployments:
        old = {(r.cluster, r.index): r.engines for r in previous.find(dp.namespace, dp.name).replicas}
        new = {(r.cluster, r.index): r.engines for r in dp.replicas}
        for ident in set(old) & set(new):
            assert new[ident] == old[ident], (dp.name, ident)
        if dp.desired >= len(old):
            assert set(old) <= set(new), dp.name
        else:
            assert set(new) <= set(old) and len(new) == dp.desired, dp.name


@SETTINGS
@given(fleets(), MODES)
def test_replanning_a_fresh_plan_is_a_fixed_point(docs, accounting):
    first = place_fleet(load(docs), accounting=accounting)
    again = place_fleet(load(docs), previous=first, accounting=accounting)
    # Placements and conditions; unplaced explanations may differ (kept replicas are
    # charged before any fill, so a "short by K" can grow).
    for a, b in zip(again.deployments, first.deployments, strict=True):
        assert (a.name, a.replicas, a.conditions) == (b.name, b.replicas, b.conditions)


@SETTINGS
@given(fleets(), MODES)
def test_spread_no_second_replica_while_an_eligible_cluster_has_none(docs, accounting):
    fp = place_fleet(load(docs), accounting=accounting)
    deps = sorted(kind(docs, "ModelDeployment"), key=lambda d: d["metadata"]["name"])
    clusters = {c["metadata"]["name"]: c for c in kind(docs, "InferenceCluster")}
    for k, dep in enumerate(deps):
        dp = fp.find("default", dep["metadata"]["name"])
        load_of = Counter(r.cluster for r in dp.replicas)
        if not load_of or max(load_of.values()) < 2:
            continue
        for yname, y in clusters.items():
            if load_of[yname] or not candidate(dep, y) or not tolerated(dep, y, ("NoSchedule", "NoExecute")):
                continue
            # Y was tried (load 0) before any cluster got a second replica, and refused.
            # Rebuild Y's ledger at that moment: only earlier deployments' replicas on Y.
            earlier = []
            kept = []
            for other in deps[:k]:
                odp = fp.find("default", other["metadata"]["name"])
                on_y = [r for r in odp.replicas if r.cluster == yname]
                o = copy.deepcopy(other)
                o["spec"]["replicas"] = len(on_y)
                earlier.append(o)
                kept.append((odp, on_y))
            trial = copy.deepcopy(dep)
            trial["spec"]["replicas"] = 1
            previous = FleetPlacement([type(odp)(odp.namespace, odp.name, len(on_y), on_y)
                                       for odp, on_y in kept])
            solo = place_fleet(load([*CLASSES.values(), y, *earlier, trial]), previous=previous,
                               accounting=accounting)
            assert solo.find("default", dep["metadata"]["name"]).replicas == [], (dep["metadata"]["name"], yname)


@SETTINGS
@given(fleets(), MODES, st.randoms(use_true_random=False))
def test_scale_down_removes_from_the_most_loaded_later_named_highest_index(docs, accounting, rnd):
    previous = place_fleet(load(docs), accounting=accounting)
    smaller = copy.deepcopy(docs)
    for d in kind(smaller, "ModelDeployment"):
        d["spec"]["replicas"] = rnd.randint(0, d["spec"]["replicas"])
    fp = place_fleet(load(smaller), previous=previous, accounting=accounting)
    for dp in fp.deployments:
        survivors = [(r.cluster, r.index) for r in previous.find(dp.namespace, dp.name).replicas]
        if dp.desired >= len(survivors):
            continue  # nothing to remove; freed capacity may let it grow instead
        while len(survivors) > dp.desired:
            load_of = Counter(c for c, _ in survivors)
            survivors.remove(max(survivors, key=lambda s: (load_of[s[0]], s[0], s[1])))
        assert [(r.cluster, r.index) for r in dp.replicas] == sorted(survivors)


@SETTINGS
@given(fleets(domains=False))
def test_node_mode_follows_every_reference_rule(docs):
    fleet = load(docs)
    fp, ledger = place_fleet_with_ledger(fleet, accounting="Node")
    assert_within_capacity(fleet, fp, ledger, "Node")
    clusters = {c["metadata"]["name"]: c for c in kind(docs, "InferenceCluster")}
    deps = {d["metadata"]["name"]: d for d in kind(docs, "ModelDeployment")}
    matcher = Matcher()
    views = compile_clusters(fleet)
    for dp in fp.deployments:
        dep = deps[dp.name]
        shape = compile_deployment(fleet, ("default", dp.name), fleet.deployments[("default", dp.name)])
        cands = [c for c in clusters.values() if candidate(dep, c)]
        # conditions follow the counts
        n, m = len(dp.replicas), dp.desired
        want = ("True", "ScaledToZero") if m == 0 else ("False", "NoClusters") if not cands else \
            ("True", "ReplicasCreated") if n == m else ("False", "PartialCapacity") if n else \
            ("False", "InsufficientCapacity")
        assert (dp.conditions[0].status, dp.conditions[0].reason) == want
        assert n + len(dp.unplaced) == m or (m == 0 and n == 0)
        per_cluster = defaultdict(list)
        for r in dp.replicas:
            per_cluster[r.cluster].append(r.index)
            assert r.name == replica_name(dp.name, r.cluster, r.index)
            assert candidate(dep, clusters[r.cluster])
            assert tolerated(dep, clusters[r.cluster], ("NoSchedule", "NoExecute"))
            for e in shape.engines:
                placed = r.engines[e.name]
                # one engine, one pool
                assert set(placed.member_pools) == {placed.pool}
                # first fit: no earlier pool that hosts the engine still has room for it
                for pv in views[r.cluster].pools:
                    if pv.name == placed.pool:
                        break
                    matches = [matcher.match(mm, pv.cls) for mm in e.members]
                    if not all(isinstance(x, MemberMatch) for x in matches):
                        continue
                    claimable = [any(isinstance(matcher.match(mm, q.cls), MemberMatch)
                                     and matcher.match(mm, q.cls).claims for q in views[r.cluster].pools)
                                 for mm in e.members]
                    if any(c and not x.claims for c, x in zip(claimable, matches, strict=True)):
                        continue
                    cost = sum(mm.pod_count for mm, x in zip(e.members, matches, strict=True) if x.claims)
                    assert ledger.state((r.cluster, pv.name)).free < cost, (dp.name, r.cluster, pv.name)
        # lowest free index on a fresh plan: 0..k-1 on every cluster
        for idx in per_cluster.values():
            assert sorted(idx) == list(range(len(idx)))


@SETTINGS
@given(fleets(), MODES, st.randoms(use_true_random=False))
def test_drain_keeps_exactly_the_replicas_whose_cluster_does_not_evict(docs, accounting, rnd):
    previous = place_fleet(load(docs), accounting=accounting)
    drained = copy.deepcopy(docs)
    for c in kind(drained, "InferenceCluster"):
        if rnd.random() < 0.4:
            c["spec"]["taints"] = [{"key": "maint", "effect": rnd.choice(["NoSchedule", "NoExecute"])}]
    fp = place_fleet(load(drained), previous=previous, accounting=accounting)
    clusters = {c["metadata"]["name"]: c for c in kind(drained, "InferenceCluster")}
    deps = {d["metadata"]["name"]: d for d in kind(drained, "ModelDeployment")}
    for dp in fp.deployments:
        dep = deps[dp.name]
        old = {(r.cluster, r.index): r for r in previous.find(dp.namespace, dp.name).replicas}
        new = {(r.cluster, r.index): r for r in dp.replicas}
        staying = {i for i in old if tolerated(dep, clusters[i[0]], ("NoExecute",))}
        assert staying <= set(new), dp.name
        for ident in set(new) - staying:
            # every replica that is not a kept one is new, and only on an open cluster
            assert tolerated(dep, clusters[ident[0]], ("NoSchedule", "NoExecute")), (dp.name, ident)
