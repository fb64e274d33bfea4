"""Placement result types and their JSON form (the `plan --json` / `--previous` schema)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping


class PlacementFormatError(ValueError):
    """A `--previous` document does not follow the placement schema."""


@dataclass(frozen=True)
class ResolvedRequest:
    """A DRA request as the replica's ResourceClaimTemplate must carry it: what the
    scheduler matched for one device request of a member on its pool's class."""
    name: str
    device_class_name: str | None
    count: int
    cels: tuple[str, ...]

    @property
    def selectors(self) -> tuple[str, ...]:
        return self.cels

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "deviceClassName": self.device_class_name, "count": self.count,
                "selectors": list(self.cels)}


@dataclass(frozen=True)
class EnginePlacement:
    pool: str
    # member_pools[i] is the pool of members[i]. Empty when read from JSON written
    # without "members": then every member is on `pool`.
    member_pools: tuple[str, ...] = ()
    # requests[i]: the DRA requests members[i] resolved on its pool (empty for a claimless
    # member), so renderers draw claims without asking the scheduler again. Empty when
    # read from JSON written without "requests": the scheduler re-resolves kept replicas.
    requests: tuple[tuple[ResolvedRequest, ...], ...] = ()

    def pools_for(self, member_count: int) -> tuple[str, ...]:
        if self.member_pools:
            return self.member_pools
        return (self.pool,) * member_count

    def to_json(self) -> dict[str, Any]:
        return {"pool": self.pool, "members": list(self.member_pools),
                "requests": [[q.to_json() for q in member] for member in self.requests]}


@dataclass(frozen=True)
class PlacedReplica:
    name: str
    index: int
    cluster: str
    engines: dict[str, EnginePlacement]

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "index": self.index,
            "cluster": self.cluster,
            "engines": {e: self.engines[e].to_json() for e in self.engines},
        }


@dataclass(frozen=True)
class Condition:
    type: str
    status: str
    reason: str
    message: str

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type, "status": self.status, "reason": self.reason,
                "message": self.message}


@dataclass(frozen=True)
class Unplaced:
    index: int
    # cluster name -> the first reason that cluster could not take this replica
    reasons: Mapping[str, str]

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "reasons": dict(self.reasons)}


@dataclass
class DeploymentPlacement:
    namespace: str
    name: str
    desired: int
    replicas: list[PlacedReplica] = field(default_factory=list)
    conditions: list[Condition] = field(default_factory=list)
    unplaced: list[Unplaced] = field(default_factory=list)
    # previous replicas not kept, with why (moved, drained, scaled down); for reports,
    # not part of the JSON schema
    dropped: list[tuple[PlacedReplica, str]] = field(default_factory=list, compare=False)

    def condition(self, type_: str) -> Condition | None:
        return next((c for c in self.conditions if c.type == type_), None)

    def to_json(self) -> dict[str, Any]:
        return {
            "namespace": self.namespace,
            "name": self.name,
            "desired": self.desired,
            "replicas": [r.to_json() for r in self.replicas],
            "conditions": [c.to_json() for c in self.conditions],
            "unplaced": [u.to_json() for u in self.unplaced],
        }


@dataclass
class FleetPlacement:
    deployments: list[DeploymentPlacement] = field(default_factory=list)

    def find(self, namespace: str, name: str) -> DeploymentPlacement | None:
        for d in self.deployments:
            if d.namespace == namespace and d.name == name:
                return d
        return None

    def to_json(self) -> dict[str, Any]:
        return {"deployments": [d.to_json() for d in self.deployments]}

    @classmethod
    def from_json(cls, data: Any) -> "FleetPlacement":
        try:
            return _fleet_from_json(data)
        except PlacementFormatError:
            raise
        except (KeyError, TypeError, AttributeError, ValueError) as exc:
            raise PlacementFormatError(f"invalid placement document: {exc!r}") from exc


def _need(obj: Any, key: str, kind: type | tuple[type, ...], where: str) -> Any:
    if not isinstance(obj, dict):
        raise PlacementFormatError(f"{where}: expected an object")
    if key not in obj:
        raise PlacementFormatError(f"{where}: missing {key!r}")
    value = obj[key]
    # bool is an int subclass; an index or a count must not be true/false
    if isinstance(value, bool) and kind in (int, (int,)):
        raise PlacementFormatError(f"{where}.{key}: expected {kind}, got bool")
    if not isinstance(value, kind):
        raise PlacementFormatError(f"{where}.{key}: expected {kind}, got {type(value).__name__}")
    return value


def _requests_from_json(data: Any, where: str) -> tuple[tuple[ResolvedRequest, ...], ...]:
    """Per member, its resolved requests; absent in documents written before they were recorded."""
    if not isinstance(data, list):
        raise PlacementFormatError(f"{where}: expected a list (one entry per member)")
    out = []
    for i, member in enumerate(data):
        if not isinstance(member, list):
            raise PlacementFormatError(f"{where}[{i}]: expected a list of requests")
        resolved = []
        for j, q in enumerate(member):
            qw = f"{where}[{i}][{j}]"
            device_class = q.get("deviceClassName") if isinstance(q, dict) else None
            if device_class is not None and not isinstance(device_class, str):
                raise PlacementFormatError(f"{qw}.deviceClassName: expected a string")
            selectors = q.get("selectors") or [] if isinstance(q, dict) else []
            if not isinstance(selectors, list) or not all(isinstance(s, str) for s in selectors):
                raise PlacementFormatError(f"{qw}.selectors: expected a list of CEL expressions")
            resolved.append(ResolvedRequest(_need(q, "name", str, qw), device_class,
                                            _need(q, "count", int, qw), tuple(selectors)))
        out.append(tuple(resolved))
    return tuple(out)


def _fleet_from_json(data: Any) -> FleetPlacement:
    deployments = []
    for i, d in enumerate(_need(data, "deployments", list, "$")):
        w = f"$.deployments[{i}]"
        replicas = []
        for j, r in enumerate(d.get("replicas", []) if isinstance(d, dict) else []):
            rw = f"{w}.replicas[{j}]"
            engines = {}
            for ename, e in _need(r, "engines", dict, rw).items():
                ew = f"{rw}.engines.{ename}"
                pool = _need(e, "pool", str, ew)
                members = e.get("members") or []
                if not isinstance(members, list) or not all(isinstance(m, str) for m in members):
                    raise PlacementFormatError(f"{ew}.members: expected a list of pool names")
                requests = _requests_from_json(e.get("requests") or [], f"{ew}.requests")
                engines[str(ename)] = EnginePlacement(pool, tuple(members), requests)
            replicas.append(PlacedReplica(
                name=_need(r, "name", str, rw),
                index=_need(r, "index", int, rw),
                cluster=_need(r, "cluster", str, rw),
                engines=engines,
            ))
        conditions = [
            Condition(c["type"], c["status"], c["reason"], c.get("message", ""))
            for c in (d.get("conditions") or [])
        ]
        unplaced = [Unplaced(int(u["index"]), dict(u.get("reasons") or {}))
                    for u in (d.get("unplaced") or [])]
        desired = d.get("desired", len(replicas))
        if isinstance(desired, bool) or not isinstance(desired, int):
            raise PlacementFormatError(f"{w}.desired: expected an integer")
        deployments.append(DeploymentPlacement(
            namespace=_need(d, "namespace", str, w),
            name=_need(d, "name", str, w),
            desired=desired,
            replicas=replicas,
            conditions=conditions,
            unplaced=unplaced,
        ))
    deployments.sort(key=lambda x: (x.namespace, x.name))
    return FleetPlacement(deployments)
