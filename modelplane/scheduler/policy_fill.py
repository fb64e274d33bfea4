"""Fill for a deployment under a placement policy (issue 14): the base fill (filter,
score, reserve) with three more plugins.

* filter: a cluster outside every `clusterPreferences` tier takes no new replica; a
  spread rule may refuse a cluster (its group is full, one group too many, or the last
  replicas must open new groups to reach minGroups);
* score: (tier, spread preference, replicas of this deployment on the cluster, name) —
  tier 1 first, then groups the minGroups still need, then the base spread-before-pack;
* reserve: the replica is placed on a trial of the ledger and committed only if every
  FleetBudget in scope can pay for its devices.

Every refusal is final for the rest of the deployment's fill (capacity and budgets only
shrink, spread blocks are monotone), so a lazy heap keeps the fill O(log C) a replica.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

from modelplane.naming import replica_name

from .budget import BudgetBook
from .ledger import Ledger, Trial
from .phases import Context, DeploymentState
from .placement import place_replica
from .policy import DeploymentPolicy
from .spread import SpreadState
from .types import PlacedReplica, Unplaced

# Why a cluster refused, by kind: feasibility tells capacity from policy by these.
CAPACITY, BUDGET, SPREAD, TIER = "capacity", "budget", "spread", "tier"


@dataclass(frozen=True)
class Refusal:
    kind: str                 # CAPACITY | BUDGET | SPREAD | TIER
    why: str
    budget: str | None = None


@dataclass
class PolicyFill:
    """One deployment's policy plugins over its current replicas; shared by the fill
    and by the moves back to a preferred tier."""

    ctx: Context
    st: DeploymentState
    policy: DeploymentPolicy
    book: BudgetBook
    ledger: Ledger
    spread: SpreadState
    load: dict[str, int] = field(default_factory=dict)
    taken: dict[str, set[int]] = field(default_factory=dict)
    refused: dict[str, Refusal] = field(default_factory=dict)

    @classmethod
    def of(cls, ctx: Context, st: DeploymentState, policy: DeploymentPolicy, book: BudgetBook,
           ledger: Ledger) -> PolicyFill:
        current = st.retained + st.placed
        pf = cls(ctx, st, policy, book, ledger,
                 SpreadState.of(policy.spread, ctx.clusters, [r.cluster for r in current]))
        for r in current:
            pf.load[r.cluster] = pf.load.get(r.cluster, 0) + 1
            pf.taken.setdefault(r.cluster, set()).add(r.index)
        return pf

    @property
    def dep(self) -> str:
        return f"{self.st.shape.namespace}/{self.st.shape.name}"

    def rank(self, cluster: str) -> int:
        prefs = self.policy.preferences
        return prefs.rank(self.ctx.clusters[cluster]) if prefs is not None else 0

    def in_tiers(self, cluster: str) -> bool:
        prefs = self.policy.preferences
        return prefs is None or self.rank(cluster) < len(prefs.tiers)

    def key(self, cluster: str) -> tuple[int, int, int, str]:
        return (self.rank(cluster), self.spread.preference(cluster), self.load.get(cluster, 0), cluster)

    def why(self, cluster: str) -> str:
        refusal = self.refused.get(cluster)
        return refusal.why if refusal is not None else "rejected"

    def tier_reason(self) -> str:
        prefs = self.policy.preferences
        names = ", ".join(t.name for t in prefs.tiers) if prefs else ""
        return f"clusterPreferences: the cluster is in no tier ({names})"

    def reserve(self, cluster: str, *, commit: bool = True) -> tuple[PlacedReplica | None, Refusal | None]:
        """Place one replica on `cluster` (capacity, then budgets) and charge both, or
        charge nothing and say why not. With commit=False only check that it would fit."""
        shape = self.st.shape
        view = self.ctx.clusters[cluster]
        trial = Trial(self.ledger)
        engines, why = place_replica(self.ctx.options(shape, view), cluster, trial)
        if engines is None:
            return None, Refusal(CAPACITY, why or "rejected")
        costs = self.book.costs(self.policy.budgets, shape, view, engines)
        over = self.book.over(costs)
        if over is not None:
            return None, Refusal(BUDGET, over[1], over[0])
        taken = self.taken.setdefault(cluster, set())
        index = 0
        while index in taken:
            index += 1
        replica = PlacedReplica(replica_name(shape.name, cluster, index), index, cluster, engines)
        if commit:
            trial.commit()
            self.book.charge(costs)
            taken.add(index)
            self.load[cluster] = self.load.get(cluster, 0) + 1
            self.spread.add(cluster)
        return replica, None


def fill_with_policy(ctx: Context, st: DeploymentState, ledger: Ledger, policy: DeploymentPolicy,
                     book: BudgetBook, surge: int = 0) -> PolicyFill:
    """Add the missing replicas (desired + moves in flight - kept) one at a time."""
    pf = PolicyFill.of(ctx, st, policy, book, ledger)
    shape = st.shape
    if shape.invalid:
        return pf
    st.candidates = len(ctx.candidates(shape))
    missing = shape.desired + surge - len(st.retained)
    if missing <= 0:
        return pf
    heap = []
    for name in ctx.open_clusters(shape):
        if pf.in_tiers(name):
            heap.append((pf.key(name), name))
        else:
            pf.refused[name] = Refusal(TIER, pf.tier_reason())
    heapq.heapify(heap)
    budget_refusal: Refusal | None = None
    opened = pf.spread.groups_used()
    while missing and heap:
        key, name = heap[0]
        fresh = pf.key(name)
        if fresh != key:                      # grew since queued: re-queue and look again
            heapq.heapreplace(heap, (fresh, name))
            continue
        why = pf.spread.block_reason(name, missing)
        if why is not None:
            heapq.heappop(heap)
            pf.refused[name] = Refusal(SPREAD, why)
            continue
        replica, refusal = pf.reserve(name)
        if replica is None:
            heapq.heappop(heap)
            pf.refused[name] = refusal or Refusal(CAPACITY, "rejected")
            if refusal is not None and refusal.budget is not None:
                budget_refusal = refusal
            continue
        st.placed.append(replica)
        missing -= 1
        groups = pf.spread.groups_used()
        if groups != opened:
            # A new group changes every cluster's spread preference, down as well as up.
            opened = groups
            heap = [(pf.key(n), n) for _, n in heap]
            heapq.heapify(heap)
        else:
            heapq.heapreplace(heap, (pf.key(name), name))
    if missing:
        if budget_refusal is not None and budget_refusal.budget is not None:
            for _ in range(missing):
                book.refuse(pf.dep, budget_refusal.budget, f"{budget_refusal.why}: {missing} replica(s) not placed")
        filtered = ctx.filter_reasons(shape)
        reasons = {name: filtered.get(name) or pf.why(name) for name in ctx.clusters}
        first = len(st.retained) + len(st.placed) - surge
        st.unplaced = [Unplaced(first + i, reasons) for i in range(missing)]
    return pf
