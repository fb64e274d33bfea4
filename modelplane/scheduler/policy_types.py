"""Result and carried-over state of the placement policies (issue 14), with their JSON.

Everything here is optional in the `plan --json` schema: a deployment without a
`placementPolicy`, a fleet without `FleetBudget`s and a fully placed deployment print
exactly what they printed before.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # types.py imports this module
    from .types import Condition

NOT_FEASIBLE = "NotFeasible"
FITS_AFTER_SCALE_UP = "FitsAfterScaleUp"
BLOCKED = "Blocked"


@dataclass(frozen=True)
class Feasibility:
    """Why one unplaced replica is unplaced, as one verdict (OCM enhancement #193)."""

    verdict: str                                   # NotFeasible | FitsAfterScaleUp | Blocked
    message: str
    cluster: str | None = None                     # FitsAfterScaleUp: where
    scale_up: Mapping[str, int] = field(default_factory=dict)   # pool -> nodes to add

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"verdict": self.verdict, "message": self.message}
        if self.cluster is not None:
            out["cluster"] = self.cluster
        if self.scale_up:
            out["scaleUp"] = dict(self.scale_up)
        return out

    @classmethod
    def from_json(cls, data: Any) -> Feasibility | None:
        if data is None:
            return None
        if not (isinstance(data, dict) and isinstance(data.get("verdict"), str)):
            raise ValueError("unplaced[].feasibility: expected an object with a verdict")
        scale = data.get("scaleUp") or {}
        if not (isinstance(scale, dict) and all(isinstance(n, int) for n in scale.values())):
            raise ValueError("unplaced[].feasibility.scaleUp: expected {pool: nodes}")
        return cls(data["verdict"], str(data.get("message", "")), data.get("cluster"), dict(scale))


@dataclass(frozen=True)
class Move:
    """A replica moving back to a more preferred tier: `to` is created first, `from_`
    is removed in a later plan, once `to` is ready."""

    from_: str
    to: str
    from_tier: str = ""
    to_tier: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"from": self.from_, "to": self.to, "fromTier": self.from_tier, "toTier": self.to_tier}


@dataclass(frozen=True)
class SpreadStatus:
    topology_key: str
    groups: Mapping[str, int]                      # group -> replicas of this deployment
    ungrouped: int = 0                             # replicas on clusters without the label

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"topologyKey": self.topology_key, "groups": dict(self.groups)}
        if self.ungrouped:
            out["ungrouped"] = self.ungrouped
        return out

    @classmethod
    def from_json(cls, data: Any) -> SpreadStatus:
        if not (isinstance(data, dict) and isinstance(data.get("topologyKey"), str)
                and isinstance(data.get("groups", {}), dict)):
            raise ValueError("placementPolicy.spread[]: expected {topologyKey, groups}")
        return cls(data["topologyKey"], {str(g): int(n) for g, n in data.get("groups", {}).items()},
                   int(data.get("ungrouped", 0)))


@dataclass
class PolicyStatus:
    """`placementPolicy` of one deployment in the placement JSON. `return_streak` and
    `moves` are read back from `--previous`: they are the policy's memory."""

    tiers: dict[str, str] = field(default_factory=dict)       # replica -> tier name
    return_streak: int = 0
    moves: list[Move] = field(default_factory=list)
    spread: list[SpreadStatus] = field(default_factory=list)
    # replicas the previous document marks `"ready": false` (read only; never written)
    not_ready: frozenset[str] = frozenset()

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.tiers:
            out["tiers"] = dict(self.tiers)
            out["returnStreak"] = self.return_streak
            out["moves"] = [m.to_json() for m in self.moves]
        if self.spread:
            out["spread"] = [s.to_json() for s in self.spread]
        return out

    @classmethod
    def from_deployment_json(cls, d: Mapping[str, Any]) -> PolicyStatus | None:
        """The carried-over state from one deployment of a previous placement document,
        or None when it has none. Raises ValueError on a malformed block."""
        not_ready = frozenset(
            str(r.get("name")) for r in (d.get("replicas") or [])
            if isinstance(r, dict) and r.get("ready") is False)
        block = d.get("placementPolicy")
        if block is None and not not_ready:
            return None
        if block is None:
            block = {}
        if not isinstance(block, dict):
            raise ValueError("placementPolicy: expected an object")
        streak = block.get("returnStreak", 0)
        if isinstance(streak, bool) or not isinstance(streak, int) or streak < 0:
            raise ValueError("placementPolicy.returnStreak: expected a non-negative integer")
        moves = []
        for i, m in enumerate(block.get("moves") or []):
            if not (isinstance(m, dict) and isinstance(m.get("from"), str) and isinstance(m.get("to"), str)):
                raise ValueError(f"placementPolicy.moves[{i}]: expected {{\"from\": name, \"to\": name}}")
            moves.append(Move(m["from"], m["to"], str(m.get("fromTier", "")), str(m.get("toTier", ""))))
        tiers = block.get("tiers") or {}
        if not (isinstance(tiers, dict) and all(isinstance(t, str) for t in tiers.values())):
            raise ValueError("placementPolicy.tiers: expected {replica: tier name}")
        spread = [SpreadStatus.from_json(s) for s in block.get("spread") or []]
        return cls(dict(tiers), streak, moves, spread, not_ready)


@dataclass
class BudgetStatus:
    """One FleetBudget after the plan: devices its scope claims, and what it refused."""

    name: str
    max_devices: int
    used: int = 0
    deployments: list[str] = field(default_factory=list)    # "namespace/name" in scope
    refused: int = 0                                         # replicas not placed or dropped for it
    condition: Condition | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "maxDevices": self.max_devices, "used": self.used,
                               "deployments": list(self.deployments), "refusedReplicas": self.refused}
        if self.condition is not None:
            out["conditions"] = [self.condition.to_json()]
        return out

    @classmethod
    def from_json(cls, data: Any, condition: Condition | None = None) -> BudgetStatus:
        if not (isinstance(data, dict) and isinstance(data.get("name"), str)):
            raise ValueError("budgets[]: expected an object with a name")
        return cls(data["name"], int(data.get("maxDevices", 0)), int(data.get("used", 0)),
                   [str(d) for d in data.get("deployments") or []], int(data.get("refusedReplicas", 0)),
                   condition)
