"""Stage `feasibility`: one verdict per unplaced replica (Open Cluster Management
enhancement #193):

* `NotFeasible` — no cluster could ever hold it, at any size: the selectors match no
  cluster, or every matching cluster can never hold it (a `never` hook says so, or the
  fill's refusal there is of kind NEVER);
* `FitsAfterScaleUp` — it fits on a cluster after adding nodes to some pools: which
  cluster, how many nodes of which pool, and whether `maxNodeCount` lets the autoscaler
  add them or a number has to be raised;
* `Blocked` — pools could hold it, but a policy refuses: a FleetBudget, or a refusal of
  kind POLICY (an untolerated taint, a spread constraint, the cluster preference tiers, a
  cluster outage, any plugin's rule), named by its plugin's `policy_name`.

Which clusters a policy refused is read from the kinds of the fill's reasons (the filters',
the clusters the fill tried, and CAPACITY for those a plugin knew to refuse: scheduler.unplaced),
which their plugins set, never from their words or codes. For the
clusters refused for capacity the plugins' `scale_up` hooks simulate the scale-up (device
fit grows the pools its engines need, gang zones a zone for each gang copy: nodes added to
a pool spread evenly over its zones), and the FleetBudgets are charged. Replicas are assessed
in order against one hypothetical ledger, so the second unplaced replica's scale-up counts
the first's (and a replica that fits on nodes added for an earlier one fits after that
scale-up too). Scale-ups are simulated on copies of the final ledger; nothing here changes
the placement.

Clusters are taken by class (scheduler.census: one template, one state on the final ledger):
the `never` and `scale_up` answers are the class's, so a verdict costs the classes (about 40
at 10,000 clusters) and the clusters the fill tried, not every cluster the selectors match.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace

from modelplane.api import InferenceCluster
from modelplane.words import counted

from .census import Census, Classes, ClassKey, remaining
from .cycle import Binding, Cycle, DeploymentState, Filtered
from .fleet_budgets import BudgetBook, book
from .growth import Growth, ScaleUp, cluster_keys, fingerprint
from .ledger import Ledger, ObservedCapacity, Trial
from .placement_types import EnginePlacement, Unplaced
from .policy_types import BLOCKED, FITS_AFTER_SCALE_UP, NOT_FEASIBLE, Feasibility
from .reasons import CAPACITY, NEVER, POLICY, Reason
from .shape import ClusterView

MISSING = -1


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
class Plan:
    """One more replica on a cluster after a scale-up: the nodes added (per pool), its engines
    as placed there, and the trial holding it."""

    nodes: int
    pools: dict[str, int]
    engines: dict[str, EnginePlacement]
    trial: Trial


@dataclass
class Candidates:
    """One filter key's candidates on the final ledger, by class (scheduler.census): per class,
    the members no filter refuses or refuses only for capacity (by name), those a filter refuses
    by policy (per plugin) and those it refuses with kind NEVER."""

    census: Census
    scalable: dict[ClassKey, list[str]]
    policy: dict[ClassKey, dict[str, list[str]]]
    never: dict[ClassKey, list[str]]


@dataclass
class Assessor:
    cycle: Cycle
    ledger: Ledger
    book: BudgetBook
    sizes: Mapping[tuple[str, str], PoolSize]
    _memo: dict[tuple[object, ...], int] = field(default_factory=dict)      # ScaleUp.nodes_to_add's
    # (scale-up hooks' keys, cluster signature, pool states) -> nodes of its plan: clusters stamped
    # from one template in the same state share the answer, across deployments of one shape
    _plans: dict[tuple[object, ...], int | None] = field(default_factory=dict)   # None: never fits
    _states: dict[str, tuple[object, ...]] = field(default_factory=dict)        # cluster -> its pools' states
    _verdict_memo: dict[tuple[object, ...], list[Feasibility]] = field(default_factory=dict)
    _candidates: dict[tuple[object, ...], Candidates] = field(default_factory=dict)   # by filter key
    _classes: dict[str, ClassKey] = field(default_factory=dict)                   # cluster -> its class
    _numbers: Classes | None = None

    def assess(self, st: DeploymentState) -> list[Unplaced]:
        unplaced = st.unplaced
        if not unplaced or st.shape.invalid:
            return unplaced
        # Deployments alike (same filters, engines and hooks' keys, the same clusters refused
        # by policy or for ever) get the same verdicts: assessed once.
        hook_keys = _hook_keys(st)
        singular = frozenset((name, why.kind, why.plugin, why.code) for name, why in
                             (*st.attempted.items(), *st.known_other.items()) if why.kind != CAPACITY)
        key = (self.cycle.filtered(st).key, st.engines_id, hook_keys, st.policy.budgets, len(unplaced), singular)
        verdicts = self._verdict_memo.get(key)
        if verdicts is None:
            verdicts, alike = self._verdicts(st, len(unplaced), hook_keys)
            if alike:
                self._verdict_memo[key] = verdicts
        return [replace(u, feasibility=v) for u, v in zip(unplaced, verdicts, strict=True)]

    # -- the three verdicts ---------------------------------------------------------
    def _verdicts(self, st: DeploymentState, count: int, hook_keys: tuple[object, ...]
                  ) -> tuple[list[Feasibility], bool]:
        """The verdicts of `st`'s `count` unplaced replicas, and whether a deployment alike gets
        the same (False when one read a reason only this deployment's fill gave)."""
        cycle, budgets = self.cycle, st.policy.budgets
        filtered = cycle.filtered(st)
        if not filtered.candidates:
            first_filtered = min(filtered.not_candidate.items(), default=None)
            because = f" (first, {first_filtered[0]}: {first_filtered[1].message})" if first_filtered else ""
            text = f"no InferenceCluster passes the cluster selectors{because}"
            return [Feasibility(NOT_FEASIBLE, text)] * count, True
        cands = self._candidates_of(filtered)
        attempted, other = st.attempted, st.known_other

        def refusal(name: str) -> Reason | None:
            """Its first reason, None for one a plugin knew to refuse for capacity."""
            return filtered.reasons.get(name) or attempted.get(name) or other.get(name)

        # the fill's own refusals other than for capacity, by class (few: tried clusters)
        singular: dict[ClassKey, dict[str, Reason]] = {}
        for name, why in (*attempted.items(), *other.items()):
            if why.kind != CAPACITY:
                singular.setdefault(cands.census.of[name], {})[name] = why
        nevers = st.hooks["never"]
        never_classes: dict[ClassKey, Reason] = {}
        feasible_classes: list[ClassKey] = []
        any_feasible = False
        for key, members in cands.census.members.items():
            rep = cycle.clusters[members[0]]        # a class answers alike
            cannot = next((no for b in nevers if (no := b.never(rep)) is not None), None)
            if cannot is not None:
                never_classes[key] = cannot
                continue
            feasible_classes.append(key)
            nevers_here = len(cands.never.get(key, ())) + sum(
                1 for said in singular.get(key, {}).values() if said.kind == NEVER)
            any_feasible = any_feasible or nevers_here < len(members)
        candidates = filtered.candidates
        if not any_feasible:
            first = candidates[0].name
            never_why = never_classes.get(cands.census.of[first]) or refusal(first)
            assert never_why is not None, f"{first} never holds {st.name}, for a reason"
            text = (f"no pool of the {counted(len(candidates), 'cluster')} the selectors match could ever hold it, "
                    f"at any size (first, {first}: {never_why.message})")
            return [Feasibility(NOT_FEASIBLE, text)] * count, True
        hypo = Trial(self.ledger)
        left = {b: self.book.rules[b].max_devices - self.book.used[b] for b in budgets}
        # Per feasible class, its scalable members by name (none refused by policy or for ever):
        # the heap holds each class's first one not yet grown (a class needs the same nodes
        # throughout), and every cluster an earlier replica's scale-up grew.
        heap: list[tuple[int, str]] = []
        rest: dict[str, tuple[Iterator[str], int]] = {}     # a class's first: its class's next ones, nodes
        for key in feasible_classes:
            skip = singular.get(key, {})
            walk = remaining(cands.scalable.get(key, []), skip)
            head = next(walk, None)
            if head is None:
                continue
            nodes_at = self._nodes_for(st, cycle.clusters[head], hook_keys)     # hypo is still empty
            if nodes_at is not None:
                heap.append((nodes_at, head))
                rest[head] = (walk, nodes_at)
        heapq.heapify(heap)
        plans: dict[str, Plan] = {}
        grown: dict[str, dict[str, int]] = {}       # cluster -> pool -> nodes added so far
        out: list[Feasibility] = []
        alike = True
        for _ in range(count):
            if not heap:
                out.append(Feasibility(BLOCKED, self._blocked(st, cands, feasible_classes, singular)))
                continue
            nodes, name = heap[0]
            cluster = cycle.clusters[name]
            plan = plans.get(name) or self._plan(st, cluster, hypo, grown.get(name, {}))
            assert plan is not None and plan.nodes == nodes
            costs = self.book.costs(budgets, st.shape, cluster, plan.engines)
            over = next((b for b, c in costs.items() if c and c > left[b]), None)
            if over is not None:
                rule = self.book.rules[over]
                needs = counted(costs[over], "device")
                out.append(Feasibility(BLOCKED, f"FleetBudget {over}: a replica needs {needs}, "
                                                f"{max(0, left[over])} of {rule.max_devices} left"))
                continue
            if nodes == 0 and name not in grown:
                # Fits as the fleet is: only a policy refused it (the fill tried every cluster).
                refused = refusal(name)
                alike = False
                out.append(Feasibility(BLOCKED, f"{name} has room but refuses: "
                                                f"{refused.message if refused is not None else 'refused'}"))
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
            following = rest.pop(name, None)        # grown now: its class's next one stands for the class
            if following is not None:
                walk, class_nodes = following
                nxt = next(walk, None)
                if nxt is not None:
                    heapq.heappush(heap, (class_nodes, nxt))
                    rest[nxt] = (walk, class_nodes)
        return out, alike

    def _blocked(self, st: DeploymentState, cands: Candidates, feasible: list[ClassKey],
                 singular: Mapping[ClassKey, Mapping[str, Reason]]) -> str:
        """Why no cluster that could hold a replica takes one: the policies refusing them."""
        names = _policy_names(st.bindings)
        by_policy: dict[str, list[str]] = {}
        for key in feasible:
            for plugin, members in cands.policy.get(key, {}).items():
                by_policy.setdefault(names.get(plugin) or plugin, []).extend(members)
            for name, why in singular.get(key, {}).items():
                if why.kind == POLICY:
                    by_policy.setdefault(names.get(why.plugin) or why.plugin or why.code, []).append(name)
        policies = "; ".join(f"{p} ({_some(sorted(cs))})" for p, cs in sorted(by_policy.items()))
        return f"every cluster that could hold it refuses it by policy: {policies}" if policies else \
            "no cluster can grow to hold it"

    def _candidates_of(self, filtered: Filtered) -> Candidates:
        hit = self._candidates.get(filtered.key)
        if hit is None:
            census = Census((c.name for c in filtered.candidates), self._class)
            scalable: dict[ClassKey, list[str]] = {}
            policy: dict[ClassKey, dict[str, list[str]]] = {}
            never: dict[ClassKey, list[str]] = {}
            for key, members in census.members.items():
                for name in members:
                    why = filtered.reasons.get(name)
                    if why is None or why.kind == CAPACITY:
                        scalable.setdefault(key, []).append(name)
                    elif why.kind == POLICY:
                        policy.setdefault(key, {}).setdefault(why.plugin or why.code, []).append(name)
                    else:
                        never.setdefault(key, []).append(name)
            hit = self._candidates[filtered.key] = Candidates(census, scalable, policy, never)
        return hit

    def _class(self, name: str) -> ClassKey:
        hit = self._classes.get(name)
        if hit is None:
            if self._numbers is None:
                self._numbers = Classes(self.ledger)
            hit = self._classes[name] = self._numbers.of(self.cycle.clusters[name])
        return hit

    # -- scale-up simulation --------------------------------------------------------
    def _nodes_for(self, st: DeploymentState, cluster: ClusterView, hook_keys: tuple[object, ...]) -> int | None:
        """`_plan(...).nodes` against the final ledger, memoized by what it depends on."""
        states = self._states.get(cluster.name)
        if states is None:
            # the zones' layout too: the pool signature does not hold it, and growth depends on it
            states = self._states[cluster.name] = tuple(
                fingerprint(self.ledger.state(key)) for key in cluster_keys(cluster)) + tuple(
                (len(p.zones), p.zone_nodes is None) for p in cluster.pools if p.zoned)
        key = (st.engines_id, hook_keys, cluster.sig_id, states)
        hit = self._plans.get(key, MISSING)
        if hit is MISSING:
            plan = self._plan(st, cluster, Trial(self.ledger))
            hit = self._plans[key] = plan.nodes if plan is not None else None
        return hit

    def _plan(self, st: DeploymentState, cluster: ClusterView, hypo: Trial,
              before: Mapping[str, int] | None = None) -> Plan | None:
        """The fewest nodes to add to `cluster`'s pools for one more replica, by every
        `scale_up` hook in registry order against a trial of `hypo` (to whose pools earlier
        plans added `before`); None if it cannot fit at any size."""
        trial = Trial(hypo)
        pools: dict[str, int] = {}
        s = ScaleUp(cluster, trial, Growth(cluster, before or {}, pools), memo=self._memo)
        for b in st.hooks["scale_up"]:
            if not b.scale_up(s):
                return None
        return Plan(s.nodes, pools, s.engines or {}, trial)

    def _message(self, cluster: str, added: dict[str, int], *, after_others: bool) -> str:
        parts = []
        for pool, n in added.items():
            size = self.sizes.get((cluster, pool))
            view = self.cycle.clusters[cluster].pool(pool)
            basis = view.nodes if view is not None else 0
            parts.append(f"{counted(n, 'node')} to pool {pool} ({_sizing(basis, basis + n, size)})")
        tail = ", counting the unplaced replicas before it" if after_others else ""
        return f"fits on {cluster} after adding " + " and ".join(parts) + tail


def _hook_keys(st: DeploymentState) -> tuple[object, ...]:
    """What the `never` and `scale_up` answers of `st` depend on besides the cluster."""
    return tuple((b.name, b.scale_up_key) for b in (*st.hooks["never"], *st.hooks["scale_up"]))


# A Blocked verdict names this many clusters per policy, then how many more.
NAMED = 3


def _some(names: list[str]) -> str:
    if len(names) <= NAMED:
        return ", ".join(names)
    return f"{', '.join(names[:NAMED])} and {len(names) - NAMED} more"


def _policy_names(bindings: tuple[Binding, ...]) -> dict[str, str]:
    return {b.name: b.policy_name or b.name for b in bindings}


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
