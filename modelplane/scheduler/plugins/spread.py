"""spread (`spreadConstraints`): replicas of one deployment over groups of clusters that
share a label value, with minGroups, maxGroups and maxReplicasPerGroup.

* admit: a cluster is refused when its group already holds `maxReplicasPerGroup`, when it
  would open a group past `maxGroups`, or when the replicas still to place are exactly the
  groups `minGroups` still needs and its group is already used;
* score: clusters of groups not used yet first, while `minGroups` is not reached;
* reserve/unreserve: count the replica in its group;
* admit_move: a move back must not leave the replicas further from the rules than they are;
* reports `SpreadSatisfied` and `placementPolicy.spread`.

Every refusal is monotone while one deployment fills (counts only grow, the replicas left
only shrink), so a cluster refused once stays refused for the rest of that fill.
Learned from Karmada's `spreadConstraints` (spreadByLabel, minGroups, maxGroups) and
KubeFleet's topology spread; docs/scheduler.md says where ours differs.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Self

from modelplane.scheduler.conditions import Condition, spread_satisfied
from modelplane.scheduler.cycle import Binding, Cycle, DeploymentState, Key, Reservation
from modelplane.scheduler.placement_types import PlacedReplica
from modelplane.scheduler.policy import SpreadRule
from modelplane.scheduler.policy_types import PolicyStatus, SpreadStatus
from modelplane.scheduler.reasons import POLICY, SPREAD_CONSTRAINT, Reason
from modelplane.scheduler.shape import ClusterView


@dataclass
class SpreadState:
    rules: tuple[SpreadRule, ...]
    clusters: dict[str, ClusterView]
    counts: list[Counter[str]] = field(default_factory=list)   # per rule: group -> replicas
    ungrouped: list[int] = field(default_factory=list)         # per rule: replicas outside any group

    @classmethod
    def of(cls, rules: tuple[SpreadRule, ...], clusters: dict[str, ClusterView],
           replica_clusters: list[str]) -> SpreadState:
        st = cls(rules, clusters, [Counter() for _ in rules], [0] * len(rules))
        for name in replica_clusters:
            st.add(name)
        return st

    def copy(self) -> SpreadState:
        return SpreadState(self.rules, self.clusters, [Counter(c) for c in self.counts], list(self.ungrouped))

    def _group(self, i: int, cluster: str) -> str | None:
        view = self.clusters.get(cluster)
        return self.rules[i].group_of(view) if view is not None else None

    def add(self, cluster: str, n: int = 1) -> None:
        for i in range(len(self.rules)):
            g = self._group(i, cluster)
            if g is None:
                self.ungrouped[i] += n
            else:
                self.counts[i][g] += n
                if self.counts[i][g] <= 0:
                    del self.counts[i][g]

    def remove(self, cluster: str) -> None:
        self.add(cluster, -1)

    def groups_used(self) -> tuple[int, ...]:
        return tuple(self.used(i) for i in range(len(self.rules)))

    def used(self, i: int) -> int:
        return sum(1 for n in self.counts[i].values() if n > 0)

    def block_reason(self, cluster: str, remaining: int) -> str | None:
        """Why one more replica may not go to `cluster`, `remaining` replicas (this one
        included) being still to place; None if every rule allows it."""
        for i, rule in enumerate(self.rules):
            g = self._group(i, cluster)
            if g is None:
                return f"spread {rule.key}: cluster has no {rule.key} label, so it is in no group"
            n = self.counts[i][g]
            if rule.max_per_group is not None and n + 1 > rule.max_per_group:
                return (f"spread {rule.key}: group {g} already has {n} replica(s) "
                        f"(maxReplicasPerGroup {rule.max_per_group})")
            used = self.used(i)
            if n == 0 and rule.max_groups is not None and used + 1 > rule.max_groups:
                return f"spread {rule.key}: already in {used} group(s) (maxGroups {rule.max_groups})"
            needed = rule.min_groups - used
            if n > 0 and needed > 0 and remaining <= needed:
                return (f"spread {rule.key}: the last {remaining} replica(s) must each open a new group "
                        f"to reach minGroups {rule.min_groups} (in {used})")
        return None

    def preference(self, cluster: str) -> int:
        """Rules that would still miss their minGroups with this cluster's group: 0 is best."""
        worse = 0
        for i, rule in enumerate(self.rules):
            g = self._group(i, cluster)
            if self.used(i) < rule.min_groups and (g is None or self.counts[i][g] > 0):
                worse += 1
        return worse

    def violation(self) -> int:
        """How far the replicas are from every rule (0: all satisfied): groups missing or
        in excess, replicas over a group's cap, and replicas outside any group."""
        total = 0
        for i, rule in enumerate(self.rules):
            used = self.used(i)
            total += max(0, rule.min_groups - used) + self.ungrouped[i]
            if rule.max_groups is not None:
                total += max(0, used - rule.max_groups)
            if rule.max_per_group is not None:
                total += sum(max(0, n - rule.max_per_group) for n in self.counts[i].values())
        return total

    def problems(self, desired: int) -> list[tuple[str, str]]:
        """(reason, message) per unmet rule, in rule order."""
        out = []
        for i, rule in enumerate(self.rules):
            used = self.used(i)
            where = ", ".join(f"{g}={n}" for g, n in sorted(self.counts[i].items()) if n > 0) or "none"
            if self.ungrouped[i]:
                out.append(("UngroupedReplicas", f"{rule.key}: {self.ungrouped[i]} replica(s) on clusters "
                                                 f"without the label ({where})"))
            if used < rule.min_groups:
                hint = (f"; {desired} replica(s) cannot span {rule.min_groups} groups"
                        if desired < rule.min_groups else "")
                out.append(("TooFewGroups", f"{rule.key}: {used} group(s) ({where}), minGroups "
                                            f"{rule.min_groups}{hint}"))
            if rule.max_groups is not None and used > rule.max_groups:
                out.append(("TooManyGroups", f"{rule.key}: {used} groups ({where}), maxGroups {rule.max_groups}"))
            if rule.max_per_group is not None:
                over = sorted(g for g, n in self.counts[i].items() if n > rule.max_per_group)
                if over:
                    out.append(("GroupOverfilled", f"{rule.key}: {', '.join(over)} over maxReplicasPerGroup "
                                                   f"{rule.max_per_group} ({where})"))
        return out

    def summary(self) -> str:
        parts = []
        for i, rule in enumerate(self.rules):
            where = ", ".join(f"{g}={n}" for g, n in sorted(self.counts[i].items()) if n > 0) or "none"
            parts.append(f"{rule.key}: {self.used(i)} group(s) ({where})")
        return "; ".join(parts)

    def status(self) -> list[SpreadStatus]:
        return [SpreadStatus(rule.key, {g: n for g, n in sorted(self.counts[i].items()) if n > 0},
                             self.ungrouped[i])
                for i, rule in enumerate(self.rules)]


SPREAD = Key[SpreadState]("spread")


class Spread(Binding):
    name = "spread"
    policy_name = "spreadConstraints"
    reserve_refuses = False

    def __init__(self, cycle: Cycle, st: DeploymentState, rules: tuple[SpreadRule, ...]) -> None:
        self.cycle, self.st, self.rules = cycle, st, rules
        self.state = SpreadState.of(rules, cycle.clusters, [])
        self._groups: tuple[int, ...] = ()

    @classmethod
    def bind(cls, cycle: Cycle, st: DeploymentState) -> Self | None:
        rules = st.policy.spread
        return cls(cycle, st, rules) if rules else None

    def begin(self) -> None:
        self.state = self.st.put(SPREAD, SpreadState.of(self.rules, self.cycle.clusters,
                                                        [r.cluster for r in self.st.current]))
        self._groups = self.state.groups_used()

    def admit(self, cluster: ClusterView, remaining: int) -> Reason | None:
        why = self.state.block_reason(cluster.name, remaining)
        return Reason(SPREAD_CONSTRAINT, self.name, why, POLICY) if why is not None else None

    def score(self, cluster: ClusterView) -> int:
        return self.state.preference(cluster.name)

    def rescore_all(self) -> bool:
        # A new group changes every cluster's preference, down as well as up.
        groups = self.state.groups_used()
        changed, self._groups = groups != self._groups, groups
        return changed

    def reserve(self, r: Reservation) -> Reason | None:
        self.state.add(r.cluster.name)
        return None

    def unreserve(self, r: Reservation) -> None:
        self.state.remove(r.cluster.name)

    def admit_move(self, replica: PlacedReplica, cluster: ClusterView) -> Reason | None:
        after = self.state.copy()
        after.add(cluster.name)
        after.remove(replica.cluster)
        if after.violation() <= self.state.violation():
            return None
        return Reason(SPREAD_CONSTRAINT, self.name,
                      f"moving {replica.name} to {cluster.name} would break a spread constraint", POLICY)

    def conditions(self) -> list[Condition]:
        return [spread_satisfied(self.st.desired, self.state.problems(self.st.desired), self.state.summary())]

    def status(self, status: PolicyStatus) -> None:
        status.spread = self.state.status()
