"""Stage `feasibility`: one verdict per unplaced replica (Open Cluster Management
enhancement #193):

* `NotFeasible` — no cluster could ever hold it, at any size: the selectors match no
  cluster, or no pool of a matching cluster matches an engine's device requests;
* `FitsAfterScaleUp` — it fits on a cluster after adding nodes to some pools: which
  cluster, how many nodes of which pool, and whether `maxNodeCount` lets the autoscaler
  add them or a number has to be raised;
* `Blocked` — pools could hold it, but a policy refuses: a FleetBudget, an untolerated
  taint, a spread constraint or the cluster preference tiers.

Which clusters a policy refused is read from the codes of the fill's reasons
(`Unplaced.reasons`), never from their words. A gang whose pools share no zone
(NoCommonZone) never fits that cluster; a zone shortfall (ZoneShortfall) is answered like a
pool's: nodes added to a pool spread evenly over its zones (modelplane.clouds.zones), so the
scale-up is what brings one zone to hold the copy. Replicas are assessed in order against one
hypothetical ledger, so the second unplaced replica's scale-up counts the first's (and a
replica that fits on nodes added for an earlier one fits after that scale-up too).
Scale-ups are simulated on copies of the final ledger; nothing here changes the placement.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from modelplane.api import InferenceCluster
from modelplane.words import counted

from .budget import BudgetBook, book
from .cycle import Cycle, DeploymentState
from .ledger import DevicePool, Ledger, NodePool, ObservedCapacity, PoolState, Trial, Usage, fresh_nodes
from .placement import EngineOptions, member_usage, no_pool_reason, place_engine
from .plugins.gang_zones import PLUGIN as GANG_ZONES
from .plugins.gang_zones import GangDemand, assign_zones, gang_demands
from .policy_types import BLOCKED, FITS_AFTER_SCALE_UP, NOT_FEASIBLE, Feasibility
from .reasons import CLUSTER_UNAVAILABLE, NO_COMMON_ZONE, NOT_IN_ANY_TIER, SPREAD_CONSTRAINT, UNTOLERATED_TAINT, Reason
from .shape import ClusterView, PoolView
from .types import EnginePlacement, Unplaced

MISSING = -1
# Refusals that block a cluster by policy (reason code -> what the verdict names);
# every other refusal is capacity or a budget, which a scale-up may answer.
BLOCKING = {CLUSTER_UNAVAILABLE: "cluster outage", UNTOLERATED_TAINT: "taints",
            SPREAD_CONSTRAINT: "spreadConstraints", NOT_IN_ANY_TIER: "clusterPreferences"}


def assess(cycle: Cycle) -> None:
    assessor = Assessor(cycle, cycle.ledger, book(cycle), pool_sizes(cycle.fleet.clusters, cycle.observed))
    for st in cycle.deployments:
        st.unplaced = assessor.assess(st)


@dataclass(frozen=True)
class PoolSize:
    """What the pool declares, and whether its capacity came from observation."""

    node_count: int
    max_node_count: int | None
    observed: bool


@dataclass
class ScaleUp:
    nodes: int
    pools: dict[str, int]
    engines: dict[str, EnginePlacement]
    trial: Trial


@dataclass
class Assessor:
    cycle: Cycle
    ledger: Ledger
    book: BudgetBook
    sizes: Mapping[tuple[str, str], PoolSize]
    _memo: dict[tuple[object, ...], int] = field(default_factory=dict)
    # (engines, cluster signature, pool states) -> nodes of its plan: clusters stamped from
    # one template in the same state share the answer, across deployments of one shape
    _plans: dict[tuple[object, ...], int | None] = field(default_factory=dict)   # None: never fits
    _states: dict[str, tuple[object, ...]] = field(default_factory=dict)        # cluster -> its pools' states
    _verdict_memo: dict[tuple[object, ...], list[Feasibility]] = field(default_factory=dict)
    _keep: list[object] = field(default_factory=list)

    def assess(self, st: DeploymentState) -> list[Unplaced]:
        unplaced = st.unplaced
        if not unplaced or st.shape.invalid:
            return unplaced
        reasons = unplaced[0].reasons
        # Deployments the fill explained with one shared reasons dict (same filters, same
        # engines, same states) get the same verdicts: assessed once.
        key = (id(reasons), self.cycle.filtered(st).key, st.engines_id, st.policy.budgets, len(unplaced))
        verdicts = self._verdict_memo.get(key)
        if verdicts is None:
            verdicts = self._verdict_memo[key] = self._verdicts(st, len(unplaced), reasons)
            self._keep.append(reasons)          # the id in the key stays this dict's
        return [replace(u, feasibility=v) for u, v in zip(unplaced, verdicts, strict=True)]

    # -- the three verdicts ---------------------------------------------------------
    def _verdicts(self, st: DeploymentState, count: int, reasons: Mapping[str, Reason]) -> list[Feasibility]:
        cycle, shape, budgets = self.cycle, st.shape, st.policy.budgets
        filtered = cycle.filtered(st)
        candidates = filtered.candidates
        if not candidates:
            first_filtered = next(iter(sorted(filtered.not_candidate.items())), None)
            because = f" (first, {first_filtered[0]}: {first_filtered[1]})" if first_filtered else ""
            return [Feasibility(NOT_FEASIBLE, f"no InferenceCluster passes the cluster selectors{because}")] * count
        never: dict[str, str] = {}
        feasible: list[ClusterView] = []
        for cluster in candidates:
            cannot = _never(cycle.options(st, cluster))
            refusal = reasons.get(cluster.name)
            if cannot is None and isinstance(refusal, Reason) and refusal.code == NO_COMMON_ZONE:
                cannot = refusal
            if cannot is None:
                feasible.append(cluster)
            else:
                never[cluster.name] = cannot
        if not feasible:
            first, why = sorted(never.items())[0]
            text = (f"no pool of the {counted(len(candidates), 'cluster')} the selectors match could ever hold it, "
                    f"at any size (first, {first}: {why})")
            return [Feasibility(NOT_FEASIBLE, text)] * count
        blocked: dict[str, str] = {}                # cluster -> the policy refusing it
        scalable: list[ClusterView] = []
        for cluster in feasible:
            reason = reasons.get(cluster.name)
            policy = BLOCKING.get(reason.code) if isinstance(reason, Reason) else None
            if policy is not None:
                blocked[cluster.name] = policy
            else:
                scalable.append(cluster)
        hypo = Trial(self.ledger)
        left = {b: self.book.rules[b].max_devices - self.book.used[b] for b in budgets}
        heap: list[tuple[int, str]] = []
        plans: dict[str, ScaleUp] = {}
        grown: dict[str, dict[str, int]] = {}       # cluster -> pool -> nodes added so far
        for cluster in scalable:
            nodes = self._nodes_for(st, cluster)     # hypo is still empty
            if nodes is not None:
                heap.append((nodes, cluster.name))
        heapq.heapify(heap)
        out: list[Feasibility] = []
        for _ in range(count):
            if not heap:
                by_policy: dict[str, list[str]] = {}
                for blocked_name, policy in sorted(blocked.items()):
                    by_policy.setdefault(policy, []).append(blocked_name)
                policies = "; ".join(f"{p} ({', '.join(cs)})" for p, cs in sorted(by_policy.items()))
                out.append(Feasibility(BLOCKED, f"every cluster that could hold it refuses it by policy: {policies}"
                                       if policies else "no cluster can grow to hold it"))
                continue
            nodes, name = heap[0]
            cluster = cycle.clusters[name]
            plan = plans.get(name) or self._plan(st, cluster, hypo, grown.get(name, {}))
            assert plan is not None and plan.nodes == nodes
            costs = self.book.costs(budgets, shape, cluster, plan.engines)
            over = next((b for b, c in costs.items() if c and c > left[b]), None)
            if over is not None:
                rule = self.book.rules[over]
                needs = counted(costs[over], "device")
                out.append(Feasibility(BLOCKED, f"FleetBudget {over}: a replica needs {needs}, "
                                                f"{max(0, left[over])} of {rule.max_devices} left"))
                continue
            if nodes == 0 and name not in grown:
                # Fits as the fleet is: only a policy refused it (the fill tried every cluster).
                out.append(Feasibility(BLOCKED, f"{name} has room but refuses: {reasons.get(name, 'refused')}"))
                continue
            # Needs nodes, or fits on nodes an earlier unplaced replica's scale-up added.
            added = grown.setdefault(name, {})
            for pool, n in plan.pools.items():
                added[pool] = added.get(pool, 0) + n
            touched = {p: n for p, n in sorted(added.items()) if n}
            message = self._message(name, touched, after_others=len(out) > 0)
            out.append(Feasibility(FITS_AFTER_SCALE_UP, message, name, touched))
            for budget, cost in costs.items():
                left[budget] -= cost
            plan.trial.commit()                    # the next replica sees this one placed
            fresh = self._plan(st, cluster, hypo, grown.get(name, {}))
            if fresh is None:
                heapq.heappop(heap)
            else:
                plans[name] = fresh
                heapq.heapreplace(heap, (fresh.nodes, name))
        return out

    # -- scale-up simulation --------------------------------------------------------
    def _nodes_for(self, st: DeploymentState, cluster: ClusterView) -> int | None:
        """`_plan(...).nodes` against the final ledger, memoized by what it depends on."""
        states = self._states.get(cluster.name)
        if states is None:
            # the zones' layout too: the pool signature does not hold it, and growth depends on it
            states = self._states[cluster.name] = tuple(
                _fingerprint(self.ledger.state(key)) for key in _keys(cluster)) + tuple(
                (len(p.zones), p.zone_nodes is None) for p in cluster.pools if p.zoned)
        key = (st.engines_id, cluster.sig_id, states)
        hit = self._plans.get(key, MISSING)
        if hit is MISSING:
            plan = self._plan(st, cluster, Trial(self.ledger))
            hit = self._plans[key] = plan.nodes if plan is not None else None
        return hit
    def _plan(self, st: DeploymentState, cluster: ClusterView, hypo: Trial,
              before: Mapping[str, int] | None = None) -> ScaleUp | None:
        """The fewest nodes to add to `cluster`'s pools for one more replica, engine by
        engine against a trial of `hypo` (to whose pools earlier plans added `before`), then
        zones for its gangs; None if it cannot fit at any size."""
        trial = Trial(hypo)
        unit = "nodes" if self.ledger.accounting == "Node" else "devices"
        pools: dict[str, int] = {}
        grown = Growth(cluster, before or {}, pools)
        engines: dict[str, EnginePlacement] = {}
        for opts in self.cycle.options(st, cluster):
            placed, _ = place_engine(opts, cluster.name, trial, unit)
            if placed is None:
                placed = self._grow(opts, cluster, trial, grown, unit)
            if placed is None:
                return None
            engines[opts.engine.name] = placed
        if any(b.name == GANG_ZONES for b in st.bindings):
            gangs = gang_demands(self.cycle.matcher, st.shape, cluster, engines)
            if isinstance(gangs, Reason):
                return None
            for demand in gangs:
                if not _zones_after_growth(demand, trial, grown):
                    return None
        return ScaleUp(sum(pools.values()), pools, engines, trial)

    def _grow(self, opts: EngineOptions, cluster: ClusterView, trial: Trial, grown: Growth,
              unit: str) -> EnginePlacement | None:
        """Add the fewest nodes that let the engine place: one host pool, or for an engine
        that only fits across a fabric group, each member's first matching pool."""
        options: list[tuple[int, dict[str, int]]] = []
        for pool, usages in opts.hosts:
            n = self._nodes(trial.state((cluster.name, pool.name)), usages, pool)
            options.append((n, {pool.name: n}))
        for group in opts.groups:
            need: dict[str, int] = {}
            for mi, member in enumerate(opts.engine.members):
                fit = next(((p, m) for p in group if (m := opts.member_fits_pool(mi, p)) is not None), None)
                if fit is None:
                    break
                n = self._nodes(trial.state((cluster.name, fit[0].name)), member_usage(member, fit[1]), fit[0])
                need[fit[0].name] = need.get(fit[0].name, 0) + n
            else:
                options.append((sum(need.values()), need))
        for _, need in sorted(options, key=lambda o: o[0]):
            for extra in range(0, 1 + sum(m.pod_count for m in opts.engine.members)):
                sub = Trial(trial)
                for pool_name, n in need.items():
                    grown.add(sub, pool_name, n + extra, commit=False)
                placed, _ = place_engine(opts, cluster.name, sub, unit)
                if placed is not None:
                    sub.commit()
                    for pool_name, n in need.items():
                        grown.pools[pool_name] = grown.pools.get(pool_name, 0) + n + extra
                    return placed
        return None

    def _nodes(self, state: PoolState, usages: list[Usage], pool: PoolView) -> int:
        key = (_fingerprint(state), tuple(usages), _per_node(pool))
        hit = self._memo.get(key)
        if hit is None:
            hit = self._memo[key] = _nodes_to_add(state, usages, _per_node(pool))
        return hit

    def _message(self, cluster: str, added: dict[str, int], *, after_others: bool) -> str:
        parts = []
        for pool, n in added.items():
            size = self.sizes.get((cluster, pool))
            view = self.cycle.clusters[cluster].pool(pool)
            basis = view.nodes if view is not None else 0
            parts.append(f"{counted(n, 'node')} to pool {pool} ({_sizing(basis, basis + n, size)})")
        tail = ", counting the unplaced replicas before it" if after_others else ""
        return f"fits on {cluster} after adding " + " and ".join(parts) + tail


def _never(options: list[EngineOptions]) -> Reason | None:
    """Why no pool of the cluster can ever host some engine, at any size."""
    for opts in options:
        if opts.error:
            return opts.error
        if not opts.hosts and not opts.groups:
            return no_pool_reason(opts.engine.name, opts.details)
    return None


def _sizing(basis: int, target: int, size: PoolSize | None) -> str:
    if size is None:
        return f"{basis} -> {target} nodes"
    have = f"{basis} observed" if size.observed else str(basis)
    if size.max_node_count:
        if target <= size.max_node_count:
            return (f"{have} -> {target} nodes, within maxNodeCount {size.max_node_count}: "
                    "the autoscaler can add them")
        return f"{have} -> {target} nodes: raise maxNodeCount from {size.max_node_count} to {target}"
    if size.observed and target <= size.node_count:
        return f"{have} -> {target} nodes: nodeCount {size.node_count} already asks for them"
    return f"{have} -> {target} nodes: raise nodeCount from {size.node_count} to {target}"


def _per_node(pool: PoolView) -> tuple[int, ...]:
    return tuple(d.count for d in pool.cls.devices)


def _keys(cluster: ClusterView) -> list[tuple[str, ...]]:
    """The ledger states of a cluster: its pools, and the zones of those that span zones."""
    return [(cluster.name, p.name) for p in cluster.pools] + [
        (cluster.name, p.name, z) for p in cluster.pools if p.zoned for z in p.zones]


@dataclass
class Growth:
    """Nodes a scale-up adds to one cluster's pools: `before` by earlier replicas' plans,
    `pools` by this one. A zoned pool's new nodes spread evenly over its zones, as its
    nodes do (modelplane.clouds.zones): each zone holds `nodes // zones` of the grown pool."""

    cluster: ClusterView
    before: Mapping[str, int]
    pools: dict[str, int]

    def nodes(self, pool: PoolView) -> int:
        return pool.nodes + self.before.get(pool.name, 0) + self.pools.get(pool.name, 0)

    def add(self, trial: Trial, pool_name: str, n: int, *, commit: bool = True) -> None:
        """`n` more nodes in the pool (and its zones) on `trial`; counted in `pools` if `commit`."""
        view = self.cluster.pool(pool_name)
        assert view is not None
        per_node, key = _per_node(view), (self.cluster.name, pool_name)
        trial.put(key, _grown(trial.state(key), n, per_node))
        if view.zoned:
            now = self.nodes(view)
            more = n if view.zone_nodes is None else (now + n) // len(view.zones) - now // len(view.zones)
            for zone in view.zones:
                trial.put((*key, zone), _grown(trial.state((*key, zone)), more, per_node))
        if commit:
            self.pools[pool_name] = self.pools.get(pool_name, 0) + n


def _zones_after_growth(demand: GangDemand, trial: Trial, grown: Growth) -> bool:
    """Zones for every copy of a gang, adding nodes to its pools until one zone holds the next
    copy: to get `d` more nodes in a zone of a pool capped at `nodes // zones`, the pool grows
    to `zones * (nodes // zones + d)`. False if growing cannot help."""
    cluster = grown.cluster
    for _ in range(demand.copies + 1):
        if assign_zones(trial, cluster.name, demand) is not None:
            return True
        best: tuple[int, dict[str, int]] | None = None
        for zone in demand.zones:
            adds: dict[str, int] = {}
            for pool_name, usages in demand.charges:
                view = cluster.pool(pool_name)
                assert view is not None
                short = _nodes_to_add(trial.peek((cluster.name, pool_name, zone)), list(usages), _per_node(view))
                if short:
                    now = grown.nodes(view)
                    zones = len(view.zones)
                    adds[pool_name] = short if view.zone_nodes is None else zones * (now // zones + short) - now
            if adds and (best is None or sum(adds.values()) < best[0]):
                best = (sum(adds.values()), adds)
        if best is None:
            return False
        for pool_name, n in best[1].items():
            grown.add(trial, pool_name, n)
    return False


def _fingerprint(state: PoolState) -> object:
    """What a pool's answer depends on (a ledger holds one kind of pool)."""
    if isinstance(state, NodePool):
        return state.free
    assert isinstance(state, DevicePool)
    return (frozenset(state.groups.items()), state.overdraft)


def _nodes_to_add(state: PoolState, usages: list[Usage], per_node: tuple[int, ...]) -> int:
    """Nodes to add so that `usages` fit: in Node accounting the missing nodes; in Device
    accounting one fresh node per pod the current nodes cannot hold, packed best-fit,
    plus one per kept pod that is already without a node (an upper bound)."""
    if isinstance(state, NodePool):
        return max(0, sum(pods for pods, _ in usages) - state.free)
    assert isinstance(state, DevicePool)
    groups = dict(state.groups)
    failed = []
    for pods, per_pod in usages:
        for _ in range(pods):
            if not DevicePool._place(groups, per_pod):
                failed.append(per_pod)
    return state.overdraft + fresh_nodes(failed, per_node)


def _grown(state: PoolState, n: int, per_node: tuple[int, ...]) -> PoolState:
    """`state` with `n` more empty nodes; kept pods without a node take new ones first."""
    if isinstance(state, NodePool):
        return NodePool(state.free + n)
    assert isinstance(state, DevicePool)
    groups = dict(state.groups)
    absorbed = min(n, state.overdraft)
    if n - absorbed:
        groups[per_node] = groups.get(per_node, 0) + n - absorbed
    return DevicePool(groups, state.overdraft - absorbed)


def pool_sizes(clusters: Mapping[str, InferenceCluster], observed: ObservedCapacity | None
               ) -> dict[tuple[str, str], PoolSize]:
    """Declared nodeCount / maxNodeCount per (cluster, pool), and which were observed."""
    out: dict[tuple[str, str], PoolSize] = {}
    seen = observed or {}
    for name, ic in clusters.items():
        for pool in ic.spec.node_pools:
            out[(name, pool.name)] = PoolSize(pool.node_count or 0, pool.max_node_count,
                                              pool.name in (seen.get(name) or {}))
    return out
