"""FleetBudgets: the most DRA devices the deployments in a budget's scope may claim,
fleet-wide. Fail closed, unlike the budgets of NVIDIA Dynamo's planner that a rebalance
pushed past (#12428) or that a schema change silently switched off (#11220):

* a replica is charged the DRA devices its members resolve on their pools (requests'
  `count` x pods), whatever the accounting mode, before it is placed (plugins.budgets);
* kept replicas are charged first; if they exceed a budget (it was lowered, or the spec
  grew), replicas are dropped until they fit, so a plan never exceeds a budget
  (the `budgets: trim kept` stage);
* a replica moving back to a preferred tier is charged twice (old and new) until the old
  one is removed, so a move never exceeds it either.

`BudgetBook` is the budgets' ledger; the stages here charge it for kept replicas and
report it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from modelplane.words import counted

from .conditions import Condition, budget_status, within_budgets
from .cycle import Cycle, DeploymentState, Key
from .matching import Matcher, MemberMatch
from .moves import MOVES
from .placement_types import EnginePlacement, PlacedReplica
from .policy import BudgetRule, budget_rules
from .policy_types import BudgetStatus
from .reasons import OVER_BUDGET, Reason
from .retain import tier_rank
from .shape import ClusterView, DeploymentShape


@dataclass
class BudgetBook:
    rules: dict[str, BudgetRule]
    matcher: Matcher
    used: dict[str, int] = field(default_factory=dict)
    refused: dict[str, int] = field(default_factory=dict)
    scopes: dict[str, list[str]] = field(default_factory=dict)      # budget -> "ns/name"
    # deployment "ns/name" -> why replicas were refused (first reason per budget)
    refusals: dict[str, dict[str, str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in self.rules:
            self.used.setdefault(name, 0)
            self.refused.setdefault(name, 0)
            self.scopes.setdefault(name, [])

    def costs(self, budgets: tuple[str, ...], shape: DeploymentShape, cluster: ClusterView,
              engines: dict[str, EnginePlacement]) -> dict[str, int]:
        """Devices one replica, placed as `engines` on `cluster`, charges to each budget."""
        out = dict.fromkeys(budgets, 0)
        if not budgets:
            return out
        for engine in shape.engines:
            placed = engines.get(engine.name)
            if placed is None:
                continue
            for member, pool_name in zip(engine.members, placed.pools_for(len(engine.members)), strict=True):
                pool = cluster.pool(pool_name)
                match = self.matcher.match(member, pool.cls) if pool is not None else None
                if not isinstance(match, MemberMatch):
                    continue
                for name in budgets:
                    rule = self.rules[name]
                    per_pod = sum(r.count for r in match.resolved if rule.counts(r.device_class_name))
                    out[name] += per_pod * member.pod_count
        return out

    def over(self, costs: dict[str, int]) -> tuple[str, str] | None:
        """(budget, why) for the first budget charging `costs` would exceed, or None."""
        for name, cost in costs.items():
            rule = self.rules[name]
            if cost and self.used[name] + cost > rule.max_devices:
                return name, (f"FleetBudget {name}: a replica needs {counted(cost, 'device')}, "
                              f"{max(0, rule.max_devices - self.used[name])} of {rule.max_devices} left")
        return None

    def charge(self, costs: dict[str, int], sign: int = 1) -> None:
        for name, cost in costs.items():
            self.used[name] += sign * cost

    def refuse(self, dep: str, budget: str, why: str) -> None:
        """Record one replica not placed (or dropped) because of `budget`."""
        self.refused[budget] += 1
        self.refusals.setdefault(dep, {}).setdefault(budget, why)

    def condition(self, dep: str, budgets: tuple[str, ...]) -> Condition:
        refusals = self.refusals.get(dep, {})
        return within_budgets(list(refusals.values()),
                              [(n, self.used[n], self.rules[n].max_devices) for n in budgets])

    def statuses(self) -> list[BudgetStatus]:
        return [BudgetStatus(name, rule.max_devices, self.used[name], sorted(self.scopes[name]), self.refused[name],
                             budget_status(self.refused[name], self.used[name], rule.max_devices))
                for name, rule in self.rules.items()]


BOOK = Key[BudgetBook]("budgets")


def book(cycle: Cycle) -> BudgetBook:
    """The cycle's budget book (every FleetBudget, each deployment in its scope)."""
    hit = cycle.get(BOOK)
    if hit is None:
        hit = cycle.put(BOOK, BudgetBook(budget_rules(cycle.fleet), cycle.matcher))
        for st in cycle.deployments:
            for budget in st.policy.budgets:
                hit.scopes[budget].append(st.name)
    return hit


def _kept_costs(cycle: Cycle, st: DeploymentState, rep: PlacedReplica) -> dict[str, int]:
    return book(cycle).costs(st.policy.budgets, st.shape, cycle.clusters[rep.cluster], rep.engines)


def trim_kept(cycle: Cycle) -> None:
    """Stage `budgets: trim kept`: charge every kept replica to its budgets; drop those that
    no longer fit (the budget was lowered or the spec grew), new halves of moves first,
    then the least preferred replicas, so that no plan exceeds a budget."""
    books = book(cycle)
    for st in cycle.deployments:
        if not st.policy.budgets or st.shape.invalid:
            continue
        moves = st.get(MOVES)
        surge = {id(new) for _, new, _ in moves.pending} if moves else set()
        rank = tier_rank(cycle, st) or (lambda _: 0)
        keep_order = {id(r): (id(r) in surge, rank(r.cluster), r.cluster, r.index) for r in st.retained}
        for rep in sorted(st.retained, key=lambda r: keep_order[id(r)]):
            costs = _kept_costs(cycle, st, rep)
            over = books.over(costs)
            if over is None:
                books.charge(costs)
                continue
            st.drop(rep, Reason(OVER_BUDGET, "budgets", f"over {over[1]}"))
            books.refuse(st.name, over[0], f"{over[1]}: kept replica {rep.name} dropped")
            if moves is not None:
                moves.pending = [p for p in moves.pending if p[1] is not rep and p[0] is not rep]


def recharge_kept(cycle: Cycle) -> None:
    """Stage `budgets: recharge kept`: the ledger may have dropped kept replicas that no
    longer fit their pool (overdraw): charge the budgets for what is really kept."""
    books = book(cycle)
    books.used = dict.fromkeys(books.rules, 0)
    for st in cycle.deployments:
        if st.policy.budgets and not st.shape.invalid:
            for rep in st.retained:
                books.charge(_kept_costs(cycle, st, rep))


def report(cycle: Cycle) -> None:
    """Stage `budgets: status`: every FleetBudget's use, refusals and condition."""
    cycle.budgets = book(cycle).statuses()
