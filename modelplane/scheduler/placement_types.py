"""Placement result types and their JSON form (the `plan --json` / `--previous` schema),
read back with the one set of field readers (jsonfields)."""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from modelplane.api.model_deployment import MAX_REPLICAS
from modelplane.json_types import JsonObject, JsonValue

from .conditions import Condition
from .jsonfields import PlacementFormatError, Where, at, count, need, optional_string, string_list, strings
from .policy_types import BudgetStatus, Feasibility, PolicyStatus, condition_from_json
from .reasons import Reason, recorded
from .refusals import Refusals, summarize

__all__ = ["REASONS_OF", "Condition", "DeploymentPlacement", "EnginePlacement", "Failover", "FleetPlacement",
           "PlacedReplica", "PlacementFormatError", "Refusals", "ResolvedRequest", "Unplaced"]

# An unplaced replica whose refusals are those of an earlier one: its index.
REASONS_OF = "reasonsOf"
# No plan gives a replica an index past the replicas a deployment may have, with the ones
# moving or failed over beside them: a larger one in a document is refused where it is
# read (it would become a label value longer than Kubernetes allows).
MAX_REPLICA_INDEX = 10 * MAX_REPLICAS


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

    def to_json(self) -> JsonObject:
        return {"name": self.name, "deviceClassName": self.device_class_name, "count": self.count,
                "selectors": list(self.cels)}

    @classmethod
    def from_json(cls, q: JsonValue, where: Where) -> ResolvedRequest:
        if not isinstance(q, dict):
            raise PlacementFormatError(f"{at(where)}: expected an object")
        device_class = q.get("deviceClassName")
        if device_class is not None and not isinstance(device_class, str):
            raise PlacementFormatError(f"{at((*where, 'deviceClassName'))}: expected a string or null")
        selectors = string_list(need(q, "selectors", list, where, []), (*where, "selectors"), "CEL expressions")
        return cls(need(q, "name", str, where), device_class, count(q, "count", where), tuple(selectors))


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
    # zones[c]: the zone copy c of a gang engine runs in, on pools whose nodes span zones
    # (plugins.gang_zones); empty for every other engine, and then absent from the JSON.
    zones: tuple[str, ...] = ()

    def pools_for(self, member_count: int) -> tuple[str, ...]:
        if self.member_pools:
            return self.member_pools
        return (self.pool,) * member_count

    @property
    def zone(self) -> str | None:
        """The one zone every copy runs in (what the renderers pin), or None."""
        return self.zones[0] if self.zones and len(set(self.zones)) == 1 else None

    def to_json(self) -> JsonObject:
        out: JsonObject = {"pool": self.pool, "members": list(self.member_pools),
                               "requests": [[q.to_json() for q in member] for member in self.requests]}
        if self.zones:
            out["zones"] = list(self.zones)
        return out

    @classmethod
    def from_json(cls, e: JsonValue, where: Where) -> EnginePlacement:
        members = string_list(need(e, "members", list, where, []), (*where, "members"), "pool names")
        requests = []
        # per member, its resolved requests; absent in documents written before they were recorded
        for i, member in enumerate(need(e, "requests", list, where, [])):
            if not isinstance(member, list):
                raise PlacementFormatError(f"{at((*where, 'requests', i))}: expected a list of requests")
            requests.append(tuple(ResolvedRequest.from_json(q, (*where, "requests", i, j))
                                  for j, q in enumerate(member)))
        zones = string_list(need(e, "zones", list, where, []), (*where, "zones"), "zone names")
        return cls(need(e, "pool", str, where), tuple(members), tuple(requests), tuple(zones))


@dataclass(frozen=True)
class PlacedReplica:
    name: str
    index: int
    cluster: str
    engines: dict[str, EnginePlacement]

    def to_json(self, engine: Callable[[EnginePlacement], object] | None = None) -> JsonObject:
        """`engine`: how to write each engine placement (its `to_json` by default)."""
        return {
            "name": self.name,
            "index": self.index,
            "cluster": self.cluster,
            "engines": {e: self.engines[e].to_json() if engine is None else engine(self.engines[e])
                        for e in self.engines},
        }

    @classmethod
    def from_json(cls, r: JsonValue, where: Where) -> PlacedReplica:
        engines = {name: EnginePlacement.from_json(e, (*where, "engines", name))
                   for name, e in need(r, "engines", dict, where).items()}
        return cls(name=need(r, "name", str, where), index=count(r, "index", where, most=MAX_REPLICA_INDEX),
                   cluster=need(r, "cluster", str, where), engines=engines)


@dataclass(frozen=True)
class Unplaced:
    index: int
    # why every cluster refused it, summarized (one object for all of a deployment's unplaced)
    refusals: Refusals
    feasibility: Feasibility | None = None   # policies: NotFeasible, FitsAfterScaleUp or Blocked

    @property
    def reasons(self) -> Mapping[str, Reason]:
        """Every cluster's first reason, where known (`Refusals.every`: a deployment place_fleet
        was asked to explain, a document written before the summary, or a summary that names
        every cluster); LookupError otherwise."""
        every = self.refusals.every()
        if every is None:
            raise LookupError(f"the summary names {sum(len(g.examples) for g in self.refusals.groups)} of the "
                              f"{self.refusals.clusters} clusters: every cluster's reason is kept only for a "
                              "deployment place_fleet(explain=...) names")
        return every

    def to_json(self) -> JsonObject:
        out: JsonObject = {"index": self.index, "refusals": self.refusals.to_json()}
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

    def to_json(self) -> JsonObject:
        return {"from": self.from_, "cluster": self.cluster, "to": self.to}

    @classmethod
    def from_json(cls, data: JsonValue, where: Where) -> Failover:
        return cls(need(data, "from", str, where), need(data, "cluster", str, where),
                   optional_string(data, "to", where))


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
    dropped: list[tuple[PlacedReplica, Reason]] = field(default_factory=list, compare=False)
    # spread, tiers, moves; None for a deployment without placementPolicy
    policy: PolicyStatus | None = field(default=None, compare=False)
    # replicas set aside on failed clusters and their replacements (scheduler.failover)
    failover: list[Failover] = field(default_factory=list)

    def condition(self, type_: str) -> Condition | None:
        return next((c for c in self.conditions if c.type == type_), None)

    def to_json(self, engine: Callable[[EnginePlacement], object] | None = None) -> JsonObject:
        """`engine`: how to write each replica's engine placements (`PlacedReplica.to_json`)."""
        return {
            "namespace": self.namespace,
            "name": self.name,
            "desired": self.desired,
            "replicas": [r.to_json(engine) for r in self.replicas],
            "conditions": [c.to_json() for c in self.conditions],
            "unplaced": _unplaced_json(self.unplaced),
            **self._policy_json(),
            **({"failover": [f.to_json() for f in self.failover]} if self.failover else {}),
        }

    def _policy_json(self) -> JsonObject:
        block = self.policy.to_json() if self.policy is not None else {}
        return {"placementPolicy": block} if block else {}

    @classmethod
    def from_json(cls, d: JsonValue, where: Where) -> DeploymentPlacement:
        replicas = [PlacedReplica.from_json(r, (*where, "replicas", j))
                    for j, r in enumerate(need(d, "replicas", list, where, []))]
        conditions = [condition_from_json(c, (*where, "conditions", j))
                      for j, c in enumerate(need(d, "conditions", list, where, []))]
        unplaced: list[Unplaced] = []
        for j, u in enumerate(need(d, "unplaced", list, where, [])):
            uw = (*where, "unplaced", j)
            if isinstance(u, dict) and sum(k in u for k in (REASONS_OF, "refusals", "reasons")) > 1:
                raise PlacementFormatError(f"{at(uw)}: one of {REASONS_OF!r}, 'refusals' and 'reasons'")
            if isinstance(u, dict) and REASONS_OF in u:
                same = need(u, REASONS_OF, int, uw)
                refusals = next((p.refusals for p in unplaced if p.index == same), None)
                if refusals is None:
                    raise PlacementFormatError(f"{at((*uw, REASONS_OF))}: no earlier unplaced replica {same}")
            elif isinstance(u, dict) and "refusals" in u:
                refusals = Refusals.from_json(u["refusals"], (*uw, "refusals"))
            else:               # written before the summary: every cluster's message
                texts = strings(need(u, "reasons", dict, uw, {}), (*uw, "reasons"))
                refusals = summarize({cluster: recorded(text) for cluster, text in texts.items()}, keep=True)
            unplaced.append(Unplaced(need(u, "index", int, uw), refusals,
                                     Feasibility.from_json(u.get("feasibility"), (*uw, "feasibility"))))
        return cls(
            namespace=need(d, "namespace", str, where),
            name=need(d, "name", str, where),
            desired=count(d, "desired", where, len(replicas)),
            replicas=replicas,
            conditions=conditions,
            unplaced=unplaced,
            policy=PolicyStatus.from_deployment_json(d, where),
            failover=[Failover.from_json(f, (*where, "failover", j))
                      for j, f in enumerate(need(d, "failover", list, where, []))],
        )


def _unplaced_json(unplaced: list[Unplaced]) -> list[JsonObject]:
    """Every unplaced replica of a deployment has the same refusals (one fill refused them all):
    written once, then `"reasonsOf": <that replica's index>`."""
    out: list[JsonObject] = []
    first: Unplaced | None = None
    for u in unplaced:
        if first is not None and u.refusals == first.refusals:
            entry: JsonObject = {"index": u.index}
            if u.feasibility is not None:
                entry["feasibility"] = u.feasibility.to_json()
            entry[REASONS_OF] = first.index
        else:
            first = u
            entry = u.to_json()
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

    def to_json(self, engine: Callable[[EnginePlacement], object] | None = None) -> JsonObject:
        out: JsonObject = {"deployments": [d.to_json(engine) for d in self.deployments]}
        if self.budgets:
            out["budgets"] = [b.to_json() for b in self.budgets]
        return out

    def to_json_text(self) -> str:
        """`json.dumps(self.to_json(), separators=(",", ":"))`, byte for byte, faster: the
        scheduler shares one engine placement between the replicas placed alike (thousands,
        most of the document), so each shared one is encoded once and spliced in where a
        one-off placeholder stands."""
        uses: dict[int, int] = {}
        for d in self.deployments:
            for r in d.replicas:
                for e in r.engines.values():
                    uses[id(e)] = uses.get(id(e), 0) + 1
        if all(n == 1 for n in uses.values()):
            return json.dumps(self.to_json(), separators=(",", ":"))
        nonce = secrets.token_hex(8)
        texts: list[str] = []
        marks: dict[int, str] = {}

        def once(shared: object, value: Callable[[], object]) -> object:
            if uses.get(id(shared), 0) < 2:
                return value()
            mark = marks.get(id(shared))
            if mark is None:
                mark = marks[id(shared)] = f"\x00{nonce}{len(texts)}\x00"
                texts.append(json.dumps(value(), separators=(",", ":")))
            return mark

        doc = self.to_json(lambda engine: once(engine, engine.to_json))
        pieces = json.dumps(doc, separators=(",", ":")).split(f'"\\u0000{nonce}')
        out = [pieces[0]]
        for piece in pieces[1:]:            # "<n>\u0000" then the rest of the document
            n, rest = piece.split('\\u0000"', 1)
            out += (texts[int(n)], rest)
        return "".join(out)

    @classmethod
    def from_json(cls, data: JsonValue) -> FleetPlacement:
        """A placement read back from `to_json` output; PlacementFormatError naming the
        JSON path of the first field that does not follow the schema."""
        deployments = [DeploymentPlacement.from_json(d, ("deployments", i))
                       for i, d in enumerate(need(data, "deployments", list, ()))]
        deployments.sort(key=lambda x: (x.namespace, x.name))
        budgets = [BudgetStatus.from_json(b, ("budgets", i)) for i, b in enumerate(need(data, "budgets", list, (), []))]
        return cls(deployments, budgets)
