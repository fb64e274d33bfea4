"""Cluster preferences (issue 14): ordered tiers, overflow down the tiers, and the way
back up once a more preferred tier has room, without flapping.

Learned from Karmada's `clusterAffinities` (groups tried in order) and the return its
users ask for (karmada #4990, #7441; kubefleet #129; modelplane #105):

* fill takes tier 1 first (policy_fill's score);
* scale-down removes replicas from the least preferred tier first;
* a replica in a lower tier moves back when a more preferred tier has had room for
  `returnAfterPlans` consecutive plans (the count travels in the placement JSON), at
  most `maxMovesPerPlan` moves in flight;
* a move never lowers the ready replicas: the new replica is placed first (charged to
  capacity and budgets next to the old one), the old one is removed by a later plan,
  once the new one is in the previous placement and not marked `"ready": false`.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from .phases import DeploymentState
from .policy import Preferences
from .policy_fill import PolicyFill
from .policy_types import Move, PolicyStatus
from .shape import ClusterView
from .types import DeploymentPlacement, PlacedReplica


@dataclass
class Moves:
    """Moves of one deployment: in flight from earlier plans, and started now."""

    pending: list[tuple[PlacedReplica, PlacedReplica, Move]] = field(default_factory=list)
    started: list[Move] = field(default_factory=list)
    streak: int = 0
    blocked: str | None = None          # why no replica could move back now

    @property
    def surge(self) -> int:
        """Replicas above spec.replicas: the new half of every move in flight."""
        return len(self.pending) + len(self.started)

    def all(self) -> list[Move]:
        return [m for _, _, m in self.pending] + self.started


def settle(st: DeploymentState, previous: DeploymentPlacement | None, prefs: Preferences,
           clusters: dict[str, ClusterView]) -> Moves:
    """Finish the moves of earlier plans whose new replica is ready (drop the old one);
    keep the others in flight. Their new replicas are set aside until `rejoin`, so that
    scale-down counts the deployment's real replicas."""
    moves = Moves()
    if previous is None or previous.policy is None:
        return moves
    ident = {r.name: (r.cluster, r.index) for r in previous.replicas}
    kept = {(r.cluster, r.index): r for r in st.retained}
    for move in previous.policy.moves:
        old = kept.get(ident.get(move.from_, ("", -1)))
        new = kept.get(ident.get(move.to, ("", -1)))
        if old is None or new is None:
            continue                            # one half is gone: nothing left to move
        if move.to in previous.policy.not_ready:
            moves.pending.append((old, new, move))
            st.retained.remove(new)
            continue
        st.retained.remove(old)
        st.charges.pop((old.cluster, old.index), None)
        tier = prefs.tier_name(prefs.rank(clusters[new.cluster]))
        st.dropped.append((old, f"moved back to tier {tier}: {new.name} on {new.cluster} is ready"))
    return moves


def scale_down(st: DeploymentState, moves: Moves, prefs: Preferences, clusters: dict[str, ClusterView]) -> None:
    """Least preferred tier first (kubefleet #129), then the base rule (most-loaded
    cluster, later name, highest index). A replica scaled away ends its move."""
    load = Counter(r.cluster for r in st.retained)
    while len(st.retained) > st.shape.desired:
        victim = max(st.retained, key=lambda r: (prefs.rank(clusters[r.cluster]), load[r.cluster], r.cluster,
                                                 r.index))
        st.retained.remove(victim)
        load[victim.cluster] -= 1
        st.charges.pop((victim.cluster, victim.index), None)
        st.dropped.append((victim, "scaled down"))
        for pair in [p for p in moves.pending if p[0] is victim]:
            moves.pending.remove(pair)
            new = pair[1]
            st.charges.pop((new.cluster, new.index), None)
            st.dropped.append((new, f"move cancelled: {victim.name}, which it was to replace, was scaled down"))


def rejoin(st: DeploymentState, moves: Moves) -> None:
    st.retained.extend(new for _, new, _ in moves.pending)
    st.retained.sort(key=lambda r: (r.cluster, r.index))


def move_back(pf: PolicyFill, moves: Moves, prefs: Preferences, previous_streak: int) -> None:
    """Start moves back to more preferred tiers once room has lasted long enough."""
    if prefs.max_moves == 0:
        return
    st = pf.st
    in_flight = {id(r) for old, new, _ in moves.pending for r in (old, new)}
    clusters = pf.ctx.clusters
    current = st.retained + st.placed
    load = Counter(r.cluster for r in current)
    # worst tier first, then the replica scale-down would pick
    movable = sorted((r for r in current if id(r) not in in_flight and prefs.rank(clusters[r.cluster]) > 0),
                     key=lambda r: (prefs.rank(clusters[r.cluster]), load[r.cluster], r.cluster, r.index),
                     reverse=True)
    found, moves.blocked = _find(pf, movable, prefs)
    moves.streak = previous_streak + 1 if found else 0
    allowed = prefs.max_moves - len(moves.pending)
    while found is not None and moves.streak >= prefs.return_after and allowed > 0:
        old, cluster = found
        new, _ = pf.reserve(cluster)
        if new is None:                     # cannot happen: _find just checked it
            break
        st.placed.append(new)
        moves.started.append(Move(old.name, new.name, prefs.tier_name(prefs.rank(clusters[old.cluster])),
                                  prefs.tier_name(prefs.rank(clusters[cluster]))))
        movable.remove(old)
        allowed -= 1
        found, _ = _find(pf, movable, prefs)


def _find(pf: PolicyFill, movable: list[PlacedReplica], prefs: Preferences
          ) -> tuple[tuple[PlacedReplica, str] | None, str | None]:
    """The first (replica, more preferred cluster) pair where a new replica would fit now
    (capacity, budgets, spread with both and after the old one leaves); else None and
    the first reason a more preferred cluster gave."""
    clusters = pf.ctx.clusters
    open_clusters = [c for c in pf.ctx.open_clusters(pf.st.shape) if pf.in_tiers(c)]
    before = pf.spread.violation()
    blocked = None
    for old in movable:
        rank = prefs.rank(clusters[old.cluster])
        for cluster in sorted((c for c in open_clusters if pf.rank(c) < rank), key=pf.key):
            why = pf.spread.block_reason(cluster, remaining=1 << 30)
            if why is None:
                after = pf.spread.copy()
                after.add(cluster)
                after.remove(old.cluster)
                if after.violation() > before:
                    why = f"moving {old.name} to {cluster} would break a spread constraint"
            if why is None:
                replica, refusal = pf.reserve(cluster, commit=False)
                if replica is not None:
                    return (old, cluster), None
                why = refusal.why if refusal is not None else "rejected"
            blocked = blocked or f"{cluster}: {why}"
    return None, blocked


def status(pf: PolicyFill, prefs: Preferences, moves: Moves) -> PolicyStatus:
    clusters = pf.ctx.clusters
    current = pf.st.retained + pf.st.placed
    ranked = sorted(current, key=lambda r: (prefs.rank(clusters[r.cluster]), r.name))
    tiers = {r.name: prefs.tier_name(prefs.rank(clusters[r.cluster])) for r in ranked}   # most preferred first
    return PolicyStatus(tiers=tiers, return_streak=moves.streak, moves=moves.all())
