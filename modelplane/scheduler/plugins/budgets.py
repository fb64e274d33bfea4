"""budgets (`FleetBudget`): a replica is placed only if every budget in its deployment's
scope can pay for the DRA devices it claims on the cluster its engines were just fitted
to (scheduler.budget keeps the book). Reports `WithinBudget`.

A refusal is of kind CAPACITY: a FleetBudget is capacity counted fleet-wide, and feasibility
charges the budgets in its scale-up simulation, which names the FleetBudget when it is what
refuses (Blocked)."""

from __future__ import annotations

from typing import Self

from modelplane.scheduler.conditions import Condition
from modelplane.scheduler.cycle import Binding, Cycle, DeploymentState, Reservation
from modelplane.scheduler.fleet_budgets import BudgetBook, book
from modelplane.scheduler.reasons import BUDGET_EXCEEDED, CAPACITY, Reason


class Budgets(Binding):
    name = "budgets"

    def __init__(self, st: DeploymentState, books: BudgetBook) -> None:
        self.st, self.book = st, books
        self.last: tuple[str, str] | None = None     # (budget, why) of the last refusal

    @classmethod
    def bind(cls, cycle: Cycle, st: DeploymentState) -> Self | None:  # noqa: ARG003 - the cycle is not needed
        return cls(st, book(cycle)) if st.policy.budgets else None

    def reserve(self, r: Reservation) -> Reason | None:
        assert r.engines is not None, "device-fit places the engines before budgets are charged"
        costs = self.book.costs(self.st.policy.budgets, self.st.shape, r.cluster, r.engines)
        over = self.book.over(costs)
        if over is not None:
            self.last = over
            return Reason(BUDGET_EXCEEDED, self.name, over[1], CAPACITY)
        self.book.charge(costs)
        r.notes = {**(r.notes or {}), self.name: costs}
        return None

    def unreserve(self, r: Reservation) -> None:
        costs = (r.notes or {}).get(self.name)
        if isinstance(costs, dict):
            self.book.charge(costs, sign=-1)

    def unplaced(self, missing: int) -> None:
        if self.last is not None:
            budget, why = self.last
            for _ in range(missing):
                self.book.refuse(self.st.name, budget, f"{why}: {missing} replica(s) not placed")

    def conditions(self) -> list[Condition]:
        return [self.book.condition(self.st.name, self.st.policy.budgets)]
