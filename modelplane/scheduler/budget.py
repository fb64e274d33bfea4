"""FleetBudgets (issue 14): the most DRA devices the deployments in a budget's scope may
claim, fleet-wide. Fail closed, unlike the budgets of NVIDIA Dynamo's planner that a
rebalance pushed past (#12428) or that a schema change silently switched off (#11220):

* a replica is charged the DRA devices its members resolve on their pools (requests'
  `count` x pods), whatever the accounting mode, before it is placed;
* kept replicas are charged first; if they exceed a budget (it was lowered, or the spec
  grew), replicas are dropped until they fit, so a plan never exceeds a budget;
* a replica moving back to a preferred tier is charged twice (old and new) until the old
  one is removed, so a move never exceeds it either.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .matching import Matcher, MemberMatch
from .policy import BudgetRule
from .policy_types import BudgetStatus
from .shape import ClusterView, DeploymentShape
from .types import Condition, EnginePlacement

CONDITION = "WithinBudget"


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
                return name, (f"FleetBudget {name}: a replica needs {cost} device(s), "
                              f"{max(0, rule.max_devices - self.used[name])} of {rule.max_devices} left")
        return None

    def charge(self, costs: dict[str, int]) -> None:
        for name, cost in costs.items():
            self.used[name] += cost

    def refuse(self, dep: str, budget: str, why: str) -> None:
        """Record one replica not placed (or dropped) because of `budget`."""
        self.refused[budget] += 1
        self.refusals.setdefault(dep, {}).setdefault(budget, why)

    def condition(self, dep: str, budgets: tuple[str, ...]) -> Condition:
        refusals = self.refusals.get(dep, {})
        if refusals:
            return Condition(CONDITION, "False", "BudgetExceeded", "; ".join(refusals.values()))
        parts = [f"FleetBudget {n}: {self.used[n]} of {self.rules[n].max_devices} devices used" for n in budgets]
        return Condition(CONDITION, "True", "WithinBudget", "; ".join(parts))

    def statuses(self) -> list[BudgetStatus]:
        out = []
        for name, rule in self.rules.items():
            refused = self.refused[name]
            used = self.used[name]
            if refused:
                cond = Condition(CONDITION, "False", "BudgetExceeded",
                                 f"{refused} replica(s) not placed or dropped: {used} of {rule.max_devices} "
                                 "devices used")
            else:
                cond = Condition(CONDITION, "True", "WithinBudget", f"{used} of {rule.max_devices} devices used")
            out.append(BudgetStatus(name, rule.max_devices, used, sorted(self.scopes[name]), refused, cond))
        return out
