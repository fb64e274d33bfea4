"""The preference tiers' fleet-level stages: the way back up once a more preferred tier has
room, without flapping (the tiers plugin ranks clusters and fills tier 1 first).

Learned from Karmada's `clusterAffinities` and the return its users ask for (karmada
#4990, #7441; kubefleet #129; modelplane #105):

* `settle moves` — moves of earlier plans whose new replica is ready end (the old one is
  dropped); the others stay in flight, their new halves held out of the count until
  `rejoin`, so scale-down counts the deployment's real replicas (it removes replicas from
  the least preferred tier first: the retain module's scale-down order);
* `end broken moves` — a move whose old or new half was not kept (budgets, overdraw) ends;
* `move back` — after every deployment filled (new replicas come before moves), a replica
  in a lower tier moves back when a more preferred tier has had room for
  `returnAfterPlans` consecutive plans (the count travels in the placement JSON), at most
  `maxMovesPerPlan` moves in flight. A move never lowers the ready replicas: the new
  replica is placed first (charged to capacity and budgets next to the old one), the old
  one is removed by a later plan, once the new one is in the previous placement and not
  marked `"ready": false`.
"""

from __future__ import annotations

from collections import Counter

from .cycle import Binding, Cycle, DeploymentState
from .fill import admit_reason, reserve, score_key
from .moves import MOVES, Moves
from .placement_types import PlacedReplica
from .policy import Preferences
from .policy_types import Move
from .reasons import MOVED_BACK, Reason, resolve
from .shape import ClusterView


def settle(cycle: Cycle) -> None:
    previous = cycle.previous.by_key() if cycle.previous is not None else {}
    for st in cycle.deployments:
        prefs = st.policy.preferences
        if prefs is None or st.shape.invalid:
            continue
        moves = st.put(MOVES, Moves())
        prev = previous.get(st.key)
        if prev is None or prev.policy is None:
            continue
        moves.previous_streak = prev.policy.return_streak
        ident = {r.name: (r.cluster, r.index) for r in prev.replicas}
        kept = {(r.cluster, r.index): r for r in st.retained}
        for move in prev.policy.moves:
            old = kept.get(ident.get(move.from_, ("", -1)))
            new = kept.get(ident.get(move.to, ("", -1)))
            if old is None or new is None:
                continue                            # one half is gone: nothing left to move
            if move.to in prev.policy.not_ready:
                moves.pending.append((old, new, move))
                st.hold(new)
                continue
            tier = prefs.tier_name(prefs.rank(cycle.clusters[new.cluster]))
            st.drop(old, Reason(MOVED_BACK, "preferences",
                                f"moved back to tier {tier}: {new.name} on {new.cluster} is ready"))


def rejoin(cycle: Cycle) -> None:
    for st in cycle.deployments:
        moves = st.get(MOVES)
        if moves is not None:
            for _, new, _ in moves.pending:
                st.rejoin(new)
            st.surge = len(moves.pending)


def end_broken(cycle: Cycle) -> None:
    for st in cycle.deployments:
        moves = st.get(MOVES)
        if moves is not None:
            moves.pending = [p for p in moves.pending if st.is_kept(p[0]) and st.is_kept(p[1])]
            st.surge = len(moves.pending)


def move_back(cycle: Cycle) -> None:
    for st in cycle.deployments:
        prefs = st.policy.preferences
        moves = st.get(MOVES)
        if prefs is None or moves is None or st.shape.invalid:
            continue
        _move_back(cycle, st, moves, prefs)
        st.surge = len(moves.pending) + len(moves.started)


def _move_back(cycle: Cycle, st: DeploymentState, moves: Moves, prefs: Preferences) -> None:
    """Start moves back to more preferred tiers once room has lasted long enough."""
    if prefs.max_moves == 0:
        return
    in_flight = {id(r) for old, new, _ in moves.pending for r in (old, new)}
    clusters = cycle.clusters
    current = st.current
    load = Counter(r.cluster for r in current)
    # worst tier first, then the replica scale-down would pick
    movable = sorted((r for r in current if id(r) not in in_flight and prefs.rank(clusters[r.cluster]) > 0),
                     key=lambda r: (prefs.rank(clusters[r.cluster]), load[r.cluster], r.cluster, r.index),
                     reverse=True)
    found, moves.blocked = _find(cycle, st, movable, prefs)
    moves.streak = moves.previous_streak + 1 if found else 0
    allowed = prefs.max_moves - len(moves.pending)
    while found is not None and moves.streak >= prefs.return_after and allowed > 0:
        old, cluster = found
        new, _ = reserve(cycle, st, clusters[cluster])
        if new is None:                     # cannot happen: _find just checked it
            break
        moves.started.append(Move(old.name, new.name, prefs.tier_name(prefs.rank(clusters[old.cluster])),
                                  prefs.tier_name(prefs.rank(clusters[cluster]))))
        movable.remove(old)
        allowed -= 1
        found, _ = _find(cycle, st, movable, prefs)


def _find(cycle: Cycle, st: DeploymentState, movable: list[PlacedReplica], prefs: Preferences
          ) -> tuple[tuple[PlacedReplica, str] | None, str | None]:
    """The first (replica, more preferred cluster) pair where a new replica would fit now
    (every admit, admit_move and reserve hook: spread with all three, and after the old one
    leaves); else None and the first reason a more preferred cluster gave."""
    clusters = cycle.clusters
    open_clusters = cycle.filtered(st).open
    movers = st.hooks["admit_move"]
    blocked = None
    for old in movable:
        rank = prefs.rank(clusters[old.cluster])
        better = [c for c in open_clusters if prefs.rank(clusters[c]) < rank]
        for cluster in sorted(better, key=lambda c: score_key(st, clusters[c])):
            refusal = admit_reason(st, clusters[cluster], remaining=1 << 30)
            why: str | None = resolve(refusal).message if refusal is not None else None
            if why is None:
                moved = _move_refusal(movers, old, clusters[cluster])
                why = moved.message if moved is not None else None
            if why is None:
                fits, refusal = reserve(cycle, st, clusters[cluster], commit=False)
                if fits is not None:
                    return (old, cluster), None
                why = resolve(refusal).message if refusal is not None else "rejected"
            blocked = blocked or f"{cluster}: {why}"
    return None, blocked


def _move_refusal(movers: list[Binding], old: PlacedReplica, cluster: ClusterView) -> Reason | None:
    return next((why for b in movers if (why := b.admit_move(old, cluster)) is not None), None)
