"""The placement policies (issue 14) wired into the fleet-wide pass.

`place_fleet` calls one `PolicyPass` at fixed points; a fleet without
`placementPolicy`s and `FleetBudget`s passes through it unchanged:

    retain -> before_scale_down (settle moves, scale down by tier) -> scale_down
           -> after_scale_down -> trim_budgets -> ledger -> after_ledger (what the
           ledger dropped for overdraw) -> fill (policy fill for deployments under a
           policy or budget) -> move_back -> finish (conditions, policy status,
           feasibility of every unplaced replica, budget status)
"""

from __future__ import annotations

from modelplane.api import Fleet

from . import preferences
from .budget import BudgetBook
from .feasibility import Assessor, pool_sizes
from .ledger import Ledger, ObservedCapacity
from .phases import Context, DeploymentState
from .policy import DeploymentPolicy, Key, budget_rules, compile_policy
from .policy_fill import PolicyFill, fill_with_policy
from .policy_types import BudgetStatus, PolicyStatus
from .spread import SpreadState
from .types import Condition, DeploymentPlacement, PlacedReplica

SPREAD = "SpreadSatisfied"
PREFERENCES = "PreferencesHonored"
NO_POLICY = DeploymentPolicy()


class PolicyPass:
    def __init__(self, fleet: Fleet, ctx: Context, observed: ObservedCapacity | None = None
                 ) -> None:
        self.fleet = fleet
        self.ctx = ctx
        self.observed = observed
        self.book = BudgetBook(budget_rules(fleet), ctx.matcher)
        self._policies: dict[Key, DeploymentPolicy] = {}
        self.moves: dict[Key, preferences.Moves] = {}
        self.fills: dict[Key, PolicyFill] = {}
        self.streaks: dict[Key, int] = {}

    def policy(self, st: DeploymentState) -> DeploymentPolicy:
        key = st.shape.key
        hit = self._policies.get(key)
        if hit is None:
            dep = self.fleet.deployments.get(key)
            hit = self._policies[key] = compile_policy(self.fleet, key, dep) if dep is not None else NO_POLICY
        return hit

    # -- before the ledger ----------------------------------------------------------
    def before_scale_down(self, st: DeploymentState, previous: DeploymentPlacement | None) -> None:
        pol = self.policy(st)
        for budget in pol.budgets:
            self.book.scopes[budget].append(_name(st))
        if pol.preferences is None or st.shape.invalid:
            return
        moves = preferences.settle(st, previous, pol.preferences, self.ctx.clusters)
        self.moves[st.shape.key] = moves
        self.streaks[st.shape.key] = previous.policy.return_streak if previous and previous.policy else 0
        preferences.scale_down(st, moves, pol.preferences, self.ctx.clusters)

    def after_scale_down(self, st: DeploymentState) -> None:
        moves = self.moves.get(st.shape.key)
        if moves is not None:
            preferences.rejoin(st, moves)

    def trim_budgets(self, states: list[DeploymentState]) -> None:
        """Charge every kept replica to its budgets; drop those that no longer fit (the
        budget was lowered or the spec grew), new halves of moves first, then the least
        preferred replicas, so that no plan exceeds a budget."""
        for st in states:
            pol = self.policy(st)
            if not pol.budgets or st.shape.invalid:
                continue
            moves = self.moves.get(st.shape.key)
            surge = {id(new) for _, new, _ in moves.pending} if moves else set()
            clusters = self.ctx.clusters
            for rep in sorted(st.retained, key=lambda r: self._keep_order(r, pol, surge)):
                costs = self.book.costs(pol.budgets, st.shape, clusters[rep.cluster], rep.engines)
                over = self.book.over(costs)
                if over is None:
                    self.book.charge(costs)
                    continue
                st.retained.remove(rep)
                st.charges.pop((rep.cluster, rep.index), None)
                st.dropped.append((rep, f"over {over[1]}"))
                self.book.refuse(_name(st), over[0], f"{over[1]}: kept replica {rep.name} dropped")
                if moves is not None:
                    moves.pending = [p for p in moves.pending if p[1] is not rep and p[0] is not rep]

    def after_ledger(self, states: list[DeploymentState]) -> None:
        """The ledger may have dropped kept replicas that no longer fit their pool
        (overdraw): charge the budgets for what is really kept, and end the moves that
        lost a half."""
        self.book.used = dict.fromkeys(self.book.rules, 0)
        for st in states:
            pol = self.policy(st)
            kept = {id(r) for r in st.retained}
            moves = self.moves.get(st.shape.key)
            if moves is not None:
                moves.pending = [p for p in moves.pending if id(p[0]) in kept and id(p[1]) in kept]
            if pol.budgets and not st.shape.invalid:
                for rep in st.retained:
                    self.book.charge(self.book.costs(pol.budgets, st.shape, self.ctx.clusters[rep.cluster],
                                                     rep.engines))

    def _keep_order(self, rep: PlacedReplica, pol: DeploymentPolicy, surge: set[int]) -> tuple[bool, int, str, int]:
        rank = pol.preferences.rank(self.ctx.clusters[rep.cluster]) if pol.preferences else 0
        return (id(rep) in surge, rank, rep.cluster, rep.index)

    # -- fill and moves -------------------------------------------------------------
    def fill(self, ctx: Context, st: DeploymentState, ledger: Ledger) -> bool:
        """Fill `st` under its policy; False when it has none (the base fill applies)."""
        pol = self.policy(st)
        if not pol.active:
            return False
        moves = self.moves.get(st.shape.key)
        self.fills[st.shape.key] = fill_with_policy(ctx, st, ledger, pol, self.book,
                                                    len(moves.pending) if moves else 0)
        return True

    def move_back(self, states: list[DeploymentState]) -> None:
        """After every deployment filled (new replicas come before moves), start the
        moves back to preferred tiers, deployment by deployment."""
        for st in states:
            pol = self.policy(st)
            pf = self.fills.get(st.shape.key)
            moves = self.moves.get(st.shape.key)
            if pol.preferences is None or pf is None or moves is None or st.shape.invalid:
                continue
            preferences.move_back(pf, moves, pol.preferences, self.streaks.get(st.shape.key, 0))

    def surge(self, st: DeploymentState) -> int:
        moves = self.moves.get(st.shape.key)
        return moves.surge if moves is not None else 0

    # -- results --------------------------------------------------------------------
    def finish(self, states: list[DeploymentState], result: list[DeploymentPlacement],
               ledger: Ledger) -> list[BudgetStatus]:
        assessor = Assessor(self.ctx, ledger, self.book, pool_sizes(self.fleet.clusters, self.observed))
        for st, dp in zip(states, result, strict=True):
            pol = self.policy(st)
            pf = self.fills.get(st.shape.key)
            if pol.active and not st.shape.invalid:
                dp.conditions.extend(self._conditions(st, pol, pf))
                dp.policy = self._status(st, pol, pf)
            dp.unplaced = assessor.assess(st.shape, dp.unplaced, pol.budgets, pf.refused if pf else None)
        return self.book.statuses()

    def _conditions(self, st: DeploymentState, pol: DeploymentPolicy, pf: PolicyFill | None) -> list[Condition]:
        out = []
        if pol.spread:
            spread = pf.spread if pf is not None else SpreadState.of(
                pol.spread, self.ctx.clusters, [r.cluster for r in st.retained + st.placed])
            out.append(_spread_condition(spread, st.shape.desired))
        if pol.preferences is not None:
            out.append(self._preference_condition(st, pol))
        if pol.budgets:
            out.append(self.book.condition(_name(st), pol.budgets))
        return out

    def _preference_condition(self, st: DeploymentState, pol: DeploymentPolicy) -> Condition:
        prefs = pol.preferences
        assert prefs is not None
        moves = self.moves.get(st.shape.key) or preferences.Moves()
        if moves.all():
            text = ", ".join(f"{m.from_} ({m.from_tier}) -> {m.to} ({m.to_tier})" for m in moves.all())
            return Condition(PREFERENCES, "False", "Moving",
                             f"moving back, new replica first: {text}")
        clusters = self.ctx.clusters
        lower = sorted(r.name for r in st.retained + st.placed if prefs.rank(clusters[r.cluster]) > 0)
        if not lower:
            return Condition(PREFERENCES, "True", "Preferred", f"every replica is in tier {prefs.tiers[0].name}")
        where = f"{len(lower)} replica(s) outside tier {prefs.tiers[0].name} ({', '.join(lower)})"
        if prefs.max_moves == 0:
            return Condition(PREFERENCES, "True", "Overflow", f"{where}; maxMovesPerPlan is 0: they stay")
        if moves.streak > 0:
            return Condition(PREFERENCES, "False", "ReturnPending",
                             f"{where}; a more preferred tier has had room for {moves.streak} of "
                             f"{prefs.return_after} consecutive plans")
        why = f": {moves.blocked}" if moves.blocked else ""
        return Condition(PREFERENCES, "True", "Overflow", f"{where}; no room in a more preferred tier{why}")

    def _status(self, st: DeploymentState, pol: DeploymentPolicy, pf: PolicyFill | None) -> PolicyStatus | None:
        status = PolicyStatus()
        if pol.preferences is not None and pf is not None:
            status = preferences.status(pf, pol.preferences, self.moves.get(st.shape.key) or preferences.Moves())
        if pol.spread and pf is not None:
            status.spread = pf.spread.status()
        return status


def _spread_condition(spread: SpreadState, desired: int) -> Condition:
    if desired == 0:
        return Condition(SPREAD, "True", "ScaledToZero", "replicas is 0: nothing to spread")
    problems = spread.problems(desired)
    if problems:
        return Condition(SPREAD, "False", problems[0][0], "; ".join(m for _, m in problems))
    return Condition(SPREAD, "True", "Satisfied", spread.summary())


def _name(st: DeploymentState) -> str:
    return f"{st.shape.namespace}/{st.shape.name}"
