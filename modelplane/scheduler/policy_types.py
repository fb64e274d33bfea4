"""Result and carried-over state of the placement policies, with their JSON.

Everything here is optional in the `plan --json` schema: a deployment without a
`placementPolicy`, a fleet without `FleetBudget`s and a fully placed deployment print
exactly what they printed before. Read with the one set of field readers (jsonfields).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from modelplane.json_types import JsonMapping, JsonObject, JsonValue

from .conditions import Condition
from .jsonfields import PlacementFormatError, Where, at, count, counts, need, optional_string, strings

NOT_FEASIBLE = "NotFeasible"
FITS_AFTER_SCALE_UP = "FitsAfterScaleUp"
BLOCKED = "Blocked"


def condition_from_json(c: JsonValue, where: Where) -> Condition:
    return Condition(need(c, "type", str, where), need(c, "status", str, where),
                     need(c, "reason", str, where), need(c, "message", str, where, ""))


@dataclass(frozen=True)
class Feasibility:
    """Why one unplaced replica is unplaced, as one verdict (OCM enhancement #193)."""

    verdict: str                                   # NotFeasible | FitsAfterScaleUp | Blocked
    message: str
    cluster: str | None = None                     # FitsAfterScaleUp: where
    scale_up: Mapping[str, int] = field(default_factory=dict)   # pool -> nodes to add

    def to_json(self) -> JsonObject:
        out: JsonObject = {"verdict": self.verdict, "message": self.message}
        if self.cluster is not None:
            out["cluster"] = self.cluster
        if self.scale_up:
            out["scaleUp"] = dict(self.scale_up)
        return out

    @classmethod
    def from_json(cls, data: JsonValue, where: Where) -> Feasibility | None:
        if data is None:
            return None
        scale = counts(need(data, "scaleUp", dict, where, {}), (*where, "scaleUp"), "node counts per pool")
        return cls(need(data, "verdict", str, where), need(data, "message", str, where, ""),
                   optional_string(data, "cluster", where), scale)


@dataclass(frozen=True)
class Move:
    """A replica moving back to a more preferred tier: `to` is created first, `from_`
    is removed in a later plan, once `to` is ready."""

    from_: str
    to: str
    from_tier: str = ""
    to_tier: str = ""

    def to_json(self) -> JsonObject:
        return {"from": self.from_, "to": self.to, "fromTier": self.from_tier, "toTier": self.to_tier}

    @classmethod
    def from_json(cls, m: JsonValue, where: Where) -> Move:
        return cls(need(m, "from", str, where), need(m, "to", str, where),
                   need(m, "fromTier", str, where, ""), need(m, "toTier", str, where, ""))


@dataclass(frozen=True)
class SpreadStatus:
    topology_key: str
    groups: Mapping[str, int]                      # group -> replicas of this deployment
    ungrouped: int = 0                             # replicas on clusters without the label

    def to_json(self) -> JsonObject:
        out: JsonObject = {"topologyKey": self.topology_key, "groups": dict(self.groups)}
        if self.ungrouped:
            out["ungrouped"] = self.ungrouped
        return out

    @classmethod
    def from_json(cls, data: JsonValue, where: Where) -> SpreadStatus:
        groups = counts(need(data, "groups", dict, where, {}), (*where, "groups"), "replica counts per group")
        return cls(need(data, "topologyKey", str, where), groups, count(data, "ungrouped", where, 0))


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

    def to_json(self) -> JsonObject:
        out: JsonObject = {}
        if self.tiers:
            out["tiers"] = dict(self.tiers)
            out["returnStreak"] = self.return_streak
            out["moves"] = [m.to_json() for m in self.moves]
        if self.spread:
            out["spread"] = [s.to_json() for s in self.spread]
        return out

    @classmethod
    def from_deployment_json(cls, d: JsonMapping, where: Where) -> PolicyStatus | None:
        """The carried-over state from one deployment of a previous placement document,
        or None when it has none."""
        not_ready = set()
        for j, r in enumerate(need(d, "replicas", list, where, [])):
            ready = need(r, "ready", bool, (*where, "replicas", j), default=True)
            if not ready:
                not_ready.add(need(r, "name", str, (*where, "replicas", j)))
        block = None if d.get("placementPolicy") is None else need(d, "placementPolicy", dict, where)
        if block is None and not not_ready:
            return None
        if block is None:
            block = {}
        bw = (*where, "placementPolicy")
        moves = [Move.from_json(m, (*bw, "moves", i)) for i, m in enumerate(need(block, "moves", list, bw, []))]
        tiers = strings(need(block, "tiers", dict, bw, {}), (*bw, "tiers"))
        spread = [SpreadStatus.from_json(s, (*bw, "spread", i))
                  for i, s in enumerate(need(block, "spread", list, bw, []))]
        return cls(dict(tiers), count(block, "returnStreak", bw, 0), moves, spread, frozenset(not_ready))


@dataclass
class BudgetStatus:
    """One FleetBudget after the plan: devices its scope claims, and what it refused."""

    name: str
    max_devices: int
    used: int = 0
    deployments: list[str] = field(default_factory=list)    # "namespace/name" in scope
    refused: int = 0                                         # replicas not placed or dropped for it
    condition: Condition | None = None

    def to_json(self) -> JsonObject:
        out: JsonObject = {"name": self.name, "maxDevices": self.max_devices, "used": self.used,
                               "deployments": list(self.deployments), "refusedReplicas": self.refused}
        if self.condition is not None:
            out["conditions"] = [self.condition.to_json()]
        return out

    @classmethod
    def from_json(cls, data: JsonValue, where: Where) -> BudgetStatus:
        deployments = need(data, "deployments", list, where, [])
        if not all(isinstance(d, str) for d in deployments):
            raise PlacementFormatError(f"{at((*where, 'deployments'))}: expected a list of \"namespace/name\"")
        conditions = [condition_from_json(c, (*where, "conditions", i))
                      for i, c in enumerate(need(data, "conditions", list, where, []))]
        return cls(need(data, "name", str, where), count(data, "maxDevices", where, 0), count(data, "used", where, 0),
                   list(deployments), count(data, "refusedReplicas", where, 0), conditions[0] if conditions else None)
