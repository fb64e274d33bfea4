"""Placement result types and their JSON form (the `plan --json` / `--previous` schema)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeVar

from .policy_types import BudgetStatus, Feasibility, PolicyStatus

# An unplaced replica whose reasons are those of an earlier one: its index.
REASONS_OF = "reasonsOf"


class PlacementFormatError(ValueError):
    """A `--previous` document does not follow the placement schema."""


_REQUIRED: Any = object()


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
    feasibility: Feasibility | None = None   # policies: NotFeasible, FitsAfterScaleUp or Blocked

    def to_json(self) -> dict[str, Any]:
        out = {"index": self.index, "reasons": dict(self.reasons)}
        if self.feasibility is not None:
            out["feasibility"] = self.feasibility.to_json()
        return out


@dataclass(frozen=True)
class Failover:
    """A replica set aside on a failed cluster, and the replica that replaces it (None while
    none could be placed)."""

    from_: str
    cluster: str
    to: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"from": self.from_, "cluster": self.cluster, "to": self.to}

    @classmethod
    def from_json(cls, data: Any) -> Failover:
        if not (isinstance(data, dict) and isinstance(data.get("from"), str) and isinstance(data.get("cluster"), str)
                and (data.get("to") is None or isinstance(data.get("to"), str))):
            raise ValueError('expected {"from": replica, "cluster": name, "to": replica or null}')
        return cls(data["from"], data["cluster"], data.get("to"))


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
    # spread, tiers, moves (issue 14); None for a deployment without placementPolicy
    policy: PolicyStatus | None = field(default=None, compare=False)
    # replicas set aside on failed clusters and their replacements (scheduler.failover)
    failover: list[Failover] = field(default_factory=list)

    def condition(self, type_: str) -> Condition | None:
        return next((c for c in self.conditions if c.type == type_), None)

    def to_json(self) -> dict[str, Any]:
        return {
            "namespace": self.namespace,
            "name": self.name,
            "desired": self.desired,
            "replicas": [r.to_json() for r in self.replicas],
            "conditions": [c.to_json() for c in self.conditions],
            "unplaced": _unplaced_json(self.unplaced),
            **self._policy_json(),
            **({"failover": [f.to_json() for f in self.failover]} if self.failover else {}),
        }

    def _policy_json(self) -> dict[str, Any]:
        block = self.policy.to_json() if self.policy is not None else {}
        return {"placementPolicy": block} if block else {}


def _unplaced_json(unplaced: list[Unplaced]) -> list[dict[str, Any]]:
    """Every unplaced replica of a deployment has the same per-cluster reasons (one fill
    refused them all): written once, then `"reasonsOf": <that replica's index>`. With a
    thousand clusters the copies were most of a placement's JSON (issue 15 item 6)."""
    out: list[dict[str, Any]] = []
    first: Unplaced | None = None
    for u in unplaced:
        entry = u.to_json()
        if first is not None and (u.reasons is first.reasons or u.reasons == first.reasons):
            del entry["reasons"]
            entry[REASONS_OF] = first.index
        else:
            first = u
        out.append(entry)
    return out


@dataclass
class FleetPlacement:
    deployments: list[DeploymentPlacement] = field(default_factory=list)
    budgets: list[BudgetStatus] = field(default_factory=list, compare=False)   # FleetBudgets

    def find(self, namespace: str, name: str) -> DeploymentPlacement | None:
        for d in self.deployments:
            if d.namespace == namespace and d.name == name:
                return d
        return None

    def by_key(self) -> dict[tuple[str, str], DeploymentPlacement]:
        """(namespace, name) -> deployment, the first one where a name repeats (as `find`)."""
        return {(d.namespace, d.name): d for d in reversed(self.deployments)}

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"deployments": [d.to_json() for d in self.deployments]}
        if self.budgets:
            out["budgets"] = [b.to_json() for b in self.budgets]
        return out

    @classmethod
    def from_json(cls, data: Any) -> FleetPlacement:
        """A placement read back from `to_json` output; PlacementFormatError naming the
        JSON path of the first field that does not follow the schema."""
        return _fleet_from_json(data)


# Where in the document a value sits, as a tuple of keys and indexes: formatted only
# when an error is raised, so reading 20,000 replicas builds no path strings.
Where = tuple[str | int, ...]


def _at(where: Where) -> str:
    out = "$"
    for part in where:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


def _need(obj: Any, key: str, kind: type, where: Where, default: Any = _REQUIRED) -> Any:
    if not isinstance(obj, dict):
        raise PlacementFormatError(f"{_at(where)}: expected an object")
    if key not in obj:
        if default is _REQUIRED:
            raise PlacementFormatError(f"{_at(where)}: missing {key!r}")
        return default
    value = obj[key]
    # bool is an int subclass; an index or a count must not be true/false
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise PlacementFormatError(f"{_at((*where, key))}: expected {_KIND_NAMES[kind]}, "
                                   f"got {_json_type(value)}")
    return value


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    return _KIND_NAMES.get(type(value), type(value).__name__)


_KIND_NAMES: dict[type, str] = {str: "a string", int: "an integer", bool: "a boolean", list: "an array",
                                dict: "an object", float: "a number"}


def _strings(value: Any, where: Where) -> dict[str, str]:
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise PlacementFormatError(f"{_at(where)}: expected an object of strings")
    return value


def _requests_from_json(data: Any, where: Where) -> tuple[tuple[ResolvedRequest, ...], ...]:
    """Per member, its resolved requests; absent in documents written before they were recorded."""
    out = []
    for i, member in enumerate(data):
        if not isinstance(member, list):
            raise PlacementFormatError(f"{_at((*where, i))}: expected a list of requests")
        resolved = []
        for j, q in enumerate(member):
            qw = (*where, i, j)
            if not isinstance(q, dict):
                raise PlacementFormatError(f"{_at(qw)}: expected an object")
            device_class = q.get("deviceClassName")
            if device_class is not None and not isinstance(device_class, str):
                raise PlacementFormatError(f"{_at((*qw, 'deviceClassName'))}: expected a string or null")
            selectors = _need(q, "selectors", list, qw, [])
            if not all(isinstance(sel, str) for sel in selectors):
                raise PlacementFormatError(f"{_at((*qw, 'selectors'))}: expected a list of CEL expressions")
            resolved.append(ResolvedRequest(_need(q, "name", str, qw), device_class,
                                            _need(q, "count", int, qw), tuple(selectors)))
        out.append(tuple(resolved))
    return tuple(out)


def _replica_from_json(r: Any, where: Where) -> PlacedReplica:
    engines = {}
    for ename, e in _need(r, "engines", dict, where).items():
        ew = (*where, "engines", ename)
        members = _need(e, "members", list, ew, [])
        if not all(isinstance(m, str) for m in members):
            raise PlacementFormatError(f"{_at((*ew, 'members'))}: expected a list of pool names")
        requests = _requests_from_json(_need(e, "requests", list, ew, []), (*ew, "requests"))
        engines[ename] = EnginePlacement(_need(e, "pool", str, ew), tuple(members), requests)
    return PlacedReplica(name=_need(r, "name", str, where), index=_need(r, "index", int, where),
                         cluster=_need(r, "cluster", str, where), engines=engines)


def _deployment_from_json(d: Any, where: Where) -> DeploymentPlacement:
    replicas = [_replica_from_json(r, (*where, "replicas", j))
                for j, r in enumerate(_need(d, "replicas", list, where, []))]
    conditions = []
    for j, c in enumerate(_need(d, "conditions", list, where, [])):
        cw = (*where, "conditions", j)
        conditions.append(Condition(_need(c, "type", str, cw), _need(c, "status", str, cw),
                                    _need(c, "reason", str, cw), _need(c, "message", str, cw, "")))
    unplaced: list[Unplaced] = []
    for j, u in enumerate(_need(d, "unplaced", list, where, [])):
        uw = (*where, "unplaced", j)
        if isinstance(u, dict) and REASONS_OF in u:
            same = _need(u, REASONS_OF, int, uw)
            reasons = next((p.reasons for p in unplaced if p.index == same), None)
            if reasons is None:
                raise PlacementFormatError(f"{_at((*uw, REASONS_OF))}: no earlier unplaced replica {same}")
        else:
            reasons = _strings(_need(u, "reasons", dict, uw, {}), (*uw, "reasons"))
        unplaced.append(Unplaced(_need(u, "index", int, uw), reasons,
                                 _extension(partial(Feasibility.from_json, u.get("feasibility")),
                                            (*uw, "feasibility"))))
    return DeploymentPlacement(
        namespace=_need(d, "namespace", str, where),
        name=_need(d, "name", str, where),
        desired=_need(d, "desired", int, where, len(replicas)),
        replicas=replicas,
        conditions=conditions,
        unplaced=unplaced,
        policy=_extension(partial(PolicyStatus.from_deployment_json, d), where),
        failover=[_extension(partial(Failover.from_json, f), (*where, "failover", j))
                  for j, f in enumerate(_need(d, "failover", list, where, []))],
    )


def _fleet_from_json(data: Any) -> FleetPlacement:
    deployments = [_deployment_from_json(d, ("deployments", i))
                   for i, d in enumerate(_need(data, "deployments", list, ()))]
    deployments.sort(key=lambda x: (x.namespace, x.name))
    budgets = [_extension(partial(_budget_from_json, b), ("budgets", i))
               for i, b in enumerate(_need(data, "budgets", list, (), []))]
    return FleetPlacement(deployments, budgets)


T = TypeVar("T")


def _extension(parse: Callable[[], T], where: Where) -> T:
    """Parse a block of the placement policies (policy_types), naming its path on error."""
    try:
        return parse()
    except (ValueError, TypeError, KeyError) as exc:
        raise PlacementFormatError(f"{_at(where)}: {exc}") from exc


def _budget_from_json(b: Any) -> BudgetStatus:
    conditions = b.get("conditions") or [] if isinstance(b, dict) else []
    cond = next((Condition(str(c["type"]), str(c["status"]), str(c["reason"]), str(c.get("message", "")))
                 for c in conditions), None)
    return BudgetStatus.from_json(b, cond)
