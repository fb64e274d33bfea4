"""Compile the placement policies into the small shapes the plugins and stages use:
spread rules and preference tiers per deployment, and the FleetBudgets in scope."""

from __future__ import annotations

from dataclasses import dataclass

from modelplane.api import Fleet, ModelDeployment
from modelplane.api.placement_policy import FleetBudget
from modelplane.vocabulary import CLUSTER_NAME_KEY

from .shape import ClusterView, Labels, labels_of

Key = tuple[str, str]


@dataclass(frozen=True)
class SpreadRule:
    key: str
    min_groups: int
    max_groups: int | None
    max_per_group: int | None

    def group_of(self, cluster: ClusterView) -> str | None:
        """The cluster's group, None when it lacks the label (then it takes no new replica)."""
        if self.key == CLUSTER_NAME_KEY:
            return cluster.name
        return cluster.labels.get(self.key)


@dataclass(frozen=True)
class Tier:
    name: str
    selector: Labels

    def matches(self, cluster: ClusterView) -> bool:
        return all(cluster.labels.get(k) == v for k, v in self.selector)


@dataclass(frozen=True)
class Preferences:
    tiers: tuple[Tier, ...]
    return_after: int
    max_moves: int

    def rank(self, cluster: ClusterView) -> int:
        """Index of the first tier matching the cluster; len(tiers) when none does."""
        return next((i for i, t in enumerate(self.tiers) if t.matches(cluster)), len(self.tiers))

    def tier_name(self, rank: int) -> str:
        return self.tiers[rank].name if rank < len(self.tiers) else "(no tier)"


@dataclass(frozen=True)
class BudgetRule:
    name: str
    max_devices: int
    device_classes: frozenset[str]      # empty: every DRA device counts

    def counts(self, device_class_name: str | None) -> bool:
        return not self.device_classes or device_class_name in self.device_classes


@dataclass(frozen=True)
class DeploymentPolicy:
    spread: tuple[SpreadRule, ...] = ()
    preferences: Preferences | None = None
    budgets: tuple[str, ...] = ()       # FleetBudgets whose scope holds this deployment

    @property
    def active(self) -> bool:
        return bool(self.spread or self.preferences or self.budgets)


NO_POLICY = DeploymentPolicy()


def budget_rules(fleet: Fleet) -> dict[str, BudgetRule]:
    return {name: BudgetRule(name, b.spec.max_devices, frozenset(b.spec.device_class_names))
            for name, b in sorted(fleet.budgets.items())}


def _in_scope(budget: FleetBudget, key: Key, dep: ModelDeployment) -> bool:
    return budget.selects(key[0], dict(dep.metadata.labels or {}))


def compile_policy(fleet: Fleet, key: Key, dep: ModelDeployment) -> DeploymentPolicy:
    block = dep.spec.placement_policy
    spread: tuple[SpreadRule, ...] = ()
    prefs = None
    if block is not None:
        spread = tuple(SpreadRule(c.topology_key, c.min_groups, c.max_groups, c.max_replicas_per_group)
                       for c in block.spread_constraints)
        cp = block.cluster_preferences
        if cp is not None:
            prefs = Preferences(tuple(Tier(t.name, labels_of(t.cluster_selector.match_labels)) for t in cp.tiers),
                                cp.return_after_plans, cp.max_moves_per_plan)
    budgets = tuple(name for name, b in sorted(fleet.budgets.items()) if _in_scope(b, key, dep))
    return DeploymentPolicy(spread, prefs, budgets)
