"""tiers (`clusterPreferences`): clusters are ranked by the first tier whose selector matches
them; a cluster in no tier takes no new replica, and the fill takes tier 1 first, then
overflows down the tiers one replica at a time. Moving back up is the preferences stages'
work (scheduler.preferences); this plugin reports them (`PreferencesHonored` and the
`placementPolicy` block) from the cycle state they share (scheduler.moves).

Learned from Karmada's `clusterAffinities` (groups tried in order; "private clusters
first, cloud second"); ours overflows per replica, where Karmada places a whole workload
in one group.
"""

from __future__ import annotations

from typing import Self

from modelplane.scheduler.conditions import Condition, TierFacts, preferences_honored
from modelplane.scheduler.cycle import Binding, Cycle, DeploymentState
from modelplane.scheduler.moves import MOVES, Moves
from modelplane.scheduler.placement_types import PlacedReplica
from modelplane.scheduler.policy import Preferences
from modelplane.scheduler.policy_types import PolicyStatus
from modelplane.scheduler.reasons import NOT_IN_ANY_TIER, POLICY, Reason
from modelplane.scheduler.shape import ClusterView


class Tiers(Binding):
    name = "tiers"
    policy_name = "clusterPreferences"

    def __init__(self, cycle: Cycle, st: DeploymentState, prefs: Preferences) -> None:
        self.cycle, self.st, self.prefs = cycle, st, prefs
        self.key = prefs.tiers

    @classmethod
    def bind(cls, cycle: Cycle, st: DeploymentState) -> Self | None:
        prefs = st.policy.preferences
        return cls(cycle, st, prefs) if prefs is not None else None

    def filter(self, cluster: ClusterView) -> Reason | None:
        if self.prefs.rank(cluster) < len(self.prefs.tiers):
            return None
        names = ", ".join(t.name for t in self.prefs.tiers)
        return Reason(NOT_IN_ANY_TIER, self.name, f"clusterPreferences: the cluster is in no tier ({names})", POLICY)

    def score(self, cluster: ClusterView) -> int:
        return self.prefs.rank(cluster)

    def _tier(self, rep: PlacedReplica) -> int:
        return self.prefs.rank(self.cycle.clusters[rep.cluster])

    def conditions(self) -> list[Condition]:
        prefs, st = self.prefs, self.st
        moves = st.get(MOVES) or Moves()
        current = st.current
        return [preferences_honored(TierFacts(
            desired=st.desired, placed=len(current), first_tier=prefs.tiers[0].name,
            outside_first=sorted(r.name for r in current if self._tier(r) > 0),
            moving=[f"{m.from_} ({m.from_tier}) -> {m.to} ({m.to_tier})" for m in moves.all()],
            max_moves=prefs.max_moves, streak=moves.streak, return_after=prefs.return_after,
            blocked=moves.blocked))]

    def status(self, status: PolicyStatus) -> None:
        moves = self.st.get(MOVES) or Moves()
        ranked = sorted(self.st.current, key=lambda r: (self._tier(r), r.name))
        status.tiers = {r.name: self.prefs.tier_name(self._tier(r)) for r in ranked}   # most preferred first
        status.return_streak = moves.streak
        status.moves = moves.all()
