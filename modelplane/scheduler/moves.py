"""Moves back to a more preferred tier: the cycle state the preferences stages write
(scheduler.preferences), scale-down and the budgets' trim update, and the tiers plugin
reports."""

from __future__ import annotations

from dataclasses import dataclass, field

from .cycle import Key
from .placement_types import PlacedReplica
from .policy_types import Move


@dataclass
class Moves:
    """Moves of one deployment: in flight from earlier plans (old, new, move), and started now."""

    pending: list[tuple[PlacedReplica, PlacedReplica, Move]] = field(default_factory=list)
    started: list[Move] = field(default_factory=list)
    streak: int = 0                     # consecutive plans a more preferred tier had room
    previous_streak: int = 0            # the streak the previous placement carried
    blocked: str | None = None          # why no replica could move back now

    def all(self) -> list[Move]:
        return [m for _, _, m in self.pending] + self.started


MOVES = Key[Moves]("moves")
