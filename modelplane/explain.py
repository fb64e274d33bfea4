"""Why one deployment's replicas are where they are, per cluster and per pool (`modelplane explain`).

For every cluster: the scheduler's own verdict (where it placed replicas, or the reason it gave
for refusing the first unplaced one: its `code`, `plugin`, `message` and `kind`), then what the scheduler
read to decide it: the clusterSelector against the cluster's labels, the taints against the
tolerations, where its ModelCache can be staged, and, per pool, each device request of each
engine member against each device of the pool's class, down to the selector clause that refuses
a device and the value the class declares for the key that clause reads. Each failing fact says
what would make it hold. The deployment's FleetBudgets and the verdict the feasibility stage gave
come last.

The words for capacity (how short a pool is, after what the plan placed) are the scheduler's:
this module never decides a placement, it reads the placement and the same compiled fleet
(modelplane.scheduler.shape) and selectors (modelplane.cel) the scheduler used, so it cannot
disagree with `plan`. `format_explanation` is the text the CLI prints; `Explanation.to_json` is
`-o json`. Meant to be reused for `plan --explain DEPLOYMENT` (issue 31).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from modelplane.api import Fleet, ModelDeployment
from modelplane.json_types import JsonObject
from modelplane.scheduler import FleetPlacement, resolve_member_requests
from modelplane.scheduler.matching import Matcher, MemberMatch
from modelplane.scheduler.plugins.device_fit.alignment import alignment_fix, misalignment
from modelplane.scheduler.plugins.selectors import label_mismatch
from modelplane.scheduler.reasons import CAPACITY, Reason
from modelplane.scheduler.shape import (
    ClassView,
    ClusterView,
    DeploymentShape,
    RequestShape,
    compile_clusters,
    compile_deployment,
)
from modelplane.scheduler.taints import repelling_taint
from modelplane.suggest import did_you_mean
from modelplane.words import counted

Key = tuple[str, str]


@dataclass(frozen=True)
class Fact:
    """One thing the scheduler checks, on a cluster or a pool: holds or not, what it saw, the fix."""

    check: str            # clusterSelector | taints | modelCache | device | capacity | zones
    ok: bool
    detail: str
    fix: str = ""

    def to_json(self) -> JsonObject:
        out: JsonObject = {"check": self.check, "ok": self.ok, "detail": self.detail}
        if self.fix:
            out["fix"] = self.fix
        return out


@dataclass(frozen=True)
class PoolExplanation:
    pool: str
    class_name: str
    nodes: int
    devices: str                    # "1 gpu per node"
    fits: bool                      # every member of every engine matches the class (no capacity)
    facts: tuple[Fact, ...]
    placed_here: tuple[str, ...]    # replicas of any deployment this plan runs on the pool
    # `engine[member]` of every member that matches the class: an engine spanning the pools of a
    # fabric domain puts each member on a pool it matches
    matching: tuple[str, ...] = ()

    def to_json(self) -> JsonObject:
        return {"pool": self.pool, "class": self.class_name, "nodes": self.nodes, "devices": self.devices,
                "fits": self.fits, "matchingMembers": list(self.matching), "facts": [f.to_json() for f in self.facts],
                "placedHere": list(self.placed_here)}

    @property
    def verdict(self) -> str:
        if self.fits:
            return "matches"
        if self.matching:
            return f"matches {', '.join(self.matching)} only (an engine may span the pools of a fabric domain)"
        return "does not match"


@dataclass(frozen=True)
class ClusterExplanation:
    cluster: str
    placed: tuple[str, ...]          # this deployment's replicas placed here
    # The scheduler's refusal of the first unplaced replica here (empty when none was refused)
    code: str
    plugin: str
    reason: str
    facts: tuple[Fact, ...]
    pools: tuple[PoolExplanation, ...]
    kind: str = ""                   # the refusal's kind: policy, capacity or never

    @property
    def verdict(self) -> str:
        refused = f"refused: {self.reason}" + (f" [{self.code}]" if self.code else "") if self.reason else ""
        if self.placed:
            return f"placed {_some(self.placed)}" + (f"; one more {refused}" if refused else "")
        return refused or "not needed (every replica is placed elsewhere)"

    def to_json(self) -> JsonObject:
        out: JsonObject = {"cluster": self.cluster, "verdict": self.verdict, "placed": list(self.placed),
                           "facts": [f.to_json() for f in self.facts], "pools": [p.to_json() for p in self.pools]}
        if self.reason:
            out["refusal"] = {"code": self.code, "plugin": self.plugin, "message": self.reason, "kind": self.kind}
        return out


@dataclass(frozen=True)
class Explanation:
    namespace: str
    name: str
    desired: int
    placed: int
    conditions: tuple[str, ...]
    clusters: tuple[ClusterExplanation, ...]
    budgets: tuple[str, ...] = ()
    verdicts: tuple[str, ...] = ()      # the feasibility stage's, per unplaced replica
    notes: tuple[str, ...] = field(default=())

    def to_json(self) -> JsonObject:
        return {"namespace": self.namespace, "name": self.name, "desired": self.desired, "placed": self.placed,
                "conditions": list(self.conditions), "clusters": [c.to_json() for c in self.clusters],
                "budgets": list(self.budgets), "unplaced": list(self.verdicts), "notes": list(self.notes)}


def _ok(check: str, detail: str) -> Fact:
    return Fact(check, ok=True, detail=detail)


def _fails(check: str, detail: str, fix: str) -> Fact:
    return Fact(check, ok=False, detail=detail, fix=fix)


class UnknownDeployment(ValueError):
    """The name given is no ModelDeployment of the fleet; the message names the nearest."""


def find_deployment(fleet: Fleet, name: str) -> Key:
    """`NAMESPACE/NAME`, or a bare NAME when one namespace has it; UnknownDeployment otherwise."""
    namespace, slash, short = name.rpartition("/")
    if slash:
        if (namespace, short) in fleet.deployments:
            return namespace, short
    else:
        found = sorted(k for k in fleet.deployments if k[1] == name)
        if len(found) == 1:
            return found[0]
        if len(found) > 1:
            raise UnknownDeployment(f"{name!r} names ModelDeployments in {counted(len(found), 'namespace')} "
                                    f"({', '.join(f'{ns}/{n}' for ns, n in found)}); say which as NAMESPACE/NAME")
    known = [f"{ns}/{n}" for ns, n in sorted(fleet.deployments)]
    candidates = known if slash else [n for _, n in sorted(fleet.deployments)]
    raise UnknownDeployment(f"no ModelDeployment {name!r} in the fleet (known: {', '.join(known[:20]) or 'none'}"
                            f"{', ...' if len(known) > 20 else ''}){did_you_mean(name, candidates)}")


def explain_deployment(fleet: Fleet, placement: FleetPlacement, key: Key,
                       observed: Mapping[str, Mapping[str, int]] | None = None) -> Explanation:
    """The explanation of deployment `key` in `placement` (which place_fleet made of `fleet`,
    with the same `observed` pool sizes, and `explain={key}`: every cluster's reason kept)."""
    dep = fleet.deployments[key]
    placed = placement.find(*key)
    if placed is None:                       # place_fleet places every deployment of the fleet
        raise ValueError(f"the placement has no deployment {key[0]}/{key[1]}")
    shape = compile_deployment(fleet, key, dep)
    clusters = compile_clusters(fleet, observed)
    every = placed.unplaced[0].refusals.every() if placed.unplaced else {}
    if every is None:
        raise ValueError(f"the placement summarizes why the clusters refused {key[0]}/{key[1]}: place the fleet "
                         "with place_fleet(..., explain={key}) to explain it cluster by cluster")
    refusals = every
    first = placed.unplaced[0].feasibility if placed.unplaced else None
    # FitsAfterScaleUp names the cluster and the nodes each pool needs
    scale_up = (first.cluster, dict(first.scale_up)) if first is not None and first.cluster else None
    on_pool = _replicas_by_pool(placement)
    matcher = Matcher()
    notes = []
    if shape.invalid:
        notes.append(shape.invalid)
    if shape.desired == 0:
        notes.append("spec.replicas is 0: the deployment is parked and asks for no replica")
    out = []
    for name, cluster in clusters.items():
        mine = tuple(r.name for r in placed.replicas if r.cluster == name)
        refusal = refusals.get(name)
        out.append(ClusterExplanation(
            name, mine, refusal.code if refusal is not None else "", refusal.plugin if refusal is not None else "",
            refusal.message if refusal is not None else "",
            tuple(_cluster_facts(fleet, shape, cluster)),
            tuple(_pool(fleet, dep, shape, cluster, pool_index, on_pool, clusters, refusal, scale_up, matcher)
                  for pool_index in range(len(cluster.pools))),
            refusal.kind if refusal is not None else ""))
    budgets = tuple(f"FleetBudget {b.name}: {b.used} of {b.max_devices} devices used, "
                    f"{counted(b.refused, 'replica')} refused"
                    + (f" ({b.condition.reason}: {b.condition.message})" if b.condition is not None
                       and b.condition.status == "False" else "")
                    for b in placement.budgets if f"{key[0]}/{key[1]}" in b.deployments)
    verdicts = tuple(f"replica #{u.index}: {u.feasibility.verdict}: {u.feasibility.message}"
                     for u in placed.unplaced if u.feasibility is not None)
    return Explanation(key[0], key[1], placed.desired, len(placed.replicas),
                       tuple(f"{c.type}={c.status} {c.reason}: {c.message}" for c in placed.conditions),
                       tuple(out), budgets, verdicts, tuple(notes))


def _names_pool(message: str, pool: str) -> bool:
    """Whether a capacity refusal is about `pool`: device-fit's and gang-zones' name the pool they
    are short in last (`... in pool P`, `... of pool P; ...`)."""
    return re.search(rf"\bpool {re.escape(pool)}(?:;|$)", message) is not None


def _replicas_by_pool(placement: FleetPlacement) -> dict[tuple[str, str], list[str]]:
    out: dict[tuple[str, str], dict[str, None]] = {}     # ordered sets: an engine per pool, or several
    for d in placement.deployments:
        for r in d.replicas:
            for e in r.engines.values():
                for pool in e.member_pools or (e.pool,):
                    out.setdefault((r.cluster, pool), {})[r.name] = None
    return {key: list(names) for key, names in out.items()}


def _cluster_facts(fleet: Fleet, shape: DeploymentShape, cluster: ClusterView) -> list[Fact]:
    facts = []
    if shape.selector:
        miss = label_mismatch(cluster.labels, shape.selector)
        wanted = ", ".join(f"{k}={v}" for k, v in shape.selector)
        if miss is None:
            facts.append(_ok("clusterSelector", f"the cluster's labels hold {wanted}"))
        else:
            key = next(k for k, v in shape.selector if cluster.labels.get(k) != v)
            values = [c.metadata.labels[key] for c in fleet.clusters.values() if key in c.metadata.labels]
            facts.append(_fails("clusterSelector", f"clusterSelector {wanted}: {miss}",
                              f"label the cluster {key}={dict(shape.selector)[key]} or change "
                              f"spec.template.spec.clusterSelector{did_you_mean(dict(shape.selector)[key], values)}"))
    taint = repelling_taint(cluster.taints, shape.tolerations)
    if taint is not None:
        facts.append(_fails("taints", f"taint {taint} is not tolerated",
                          f"add a toleration {{key: {taint.key}, operator: Exists, effect: {taint.effect}}} to "
                          "spec.template.spec.tolerations, or remove the taint from the cluster"))
    elif cluster.taints:
        facts.append(_ok("taints", f"every taint is tolerated ({', '.join(map(str, cluster.taints))})"))
    if shape.cache_name:
        if shape.cache_selector and label_mismatch(cluster.labels, shape.cache_selector) is not None:
            facts.append(_fails("modelCache", f"ModelCache {shape.cache_name}'s clusterSelector: "
                              f"{label_mismatch(cluster.labels, shape.cache_selector)}",
                              "widen the ModelCache's clusterSelector or label the cluster"))
        elif cluster.cache_problem:
            facts.append(_fails("modelCache", f"ModelCache {shape.cache_name} cannot be staged here: "
                              f"{cluster.cache_problem}", "give the cluster cache storage (docs/rendering.md)"))
        else:
            facts.append(_ok("modelCache", f"ModelCache {shape.cache_name} can be staged here"))
    if cluster.outage:
        facts.append(_fails("outage", f"takes no new replica: {cluster.outage}", "wait for the cluster or fix it"))
    if not cluster.pools:
        facts.append(_fails("pools", "the cluster publishes no pool (none has a class with devices)",
                          "add a nodePool whose className names an InferenceClass with devices"))
    return facts


def _pool(fleet: Fleet, dep: ModelDeployment, shape: DeploymentShape, cluster: ClusterView, index: int,
          on_pool: Mapping[tuple[str, str], Sequence[str]], clusters: Mapping[str, ClusterView],
          refusal: Reason | None, scale_up: tuple[str, dict[str, int]] | None, matcher: Matcher
          ) -> PoolExplanation:
    pool = cluster.pools[index]
    cls = pool.cls
    facts: list[Fact] = []
    fits = True
    matching = []
    for engine in shape.engines:
        for member in engine.members:
            try:
                resolve_member_requests(fleet, dep, engine.name, member.index, cls.name)
            except KeyError as exc:
                fits = False
                why = str(exc.args[0]) if exc.args else str(exc)
                facts += _request_facts(engine.name, member.index, member.role, member.requests, cls, clusters,
                                        why)
                continue
            # Device fit's PCIe rule on top of the match (plugins/device_fit/alignment.py): the
            # devices match, but one node of the class's instance type cannot hold them aligned.
            match = matcher.match(member, cls)
            unaligned = misalignment(match, cls) if isinstance(match, MemberMatch) else None
            if unaligned is not None:
                fits = False
                facts.append(_fails("device", f"engine {engine.name} member {member.index} ({member.role}) "
                                    f"request {unaligned.gpus!r} {unaligned}", alignment_fix()))
                continue
            matching.append(f"{engine.name}[{member.index}]")
            for request in member.requests:
                facts.append(_ok("device", f"engine {engine.name} member {member.index} ({member.role}) "
                                  f"request {request.name!r}: {_matching_devices(request.cels, request.count, cls)}"))
    if pool.zoned:
        facts.append(_ok("zones", f"its nodes span zones {', '.join(pool.zones)}: a gang copy keeps to one "
                          f"zone (at most {pool.zone_nodes} node(s) each)" if pool.zone_nodes
                          else f"its nodes span zones {', '.join(pool.zones)}: a gang copy keeps to one zone"))
    here = tuple(on_pool.get((cluster.name, pool.name), ()))
    if fits and refusal is not None and refusal.kind == CAPACITY and _names_pool(refusal.message, pool.name):
        add = scale_up[1].get(pool.name) if scale_up is not None and scale_up[0] == cluster.name else None
        fix = (f"add {counted(add, 'node')} to pool {pool.name} (nodeCount {pool.nodes} -> {pool.nodes + add})"
               if add else f"add nodes to pool {pool.name}, or free what other replicas take of it")
        facts.append(_fails("capacity", f"{refusal.message} ({counted(len(here), 'replica')} of "
                          "this plan on it)", fix))
    per_node = ", ".join(f"{d.count}x {d.name}" for d in cls.devices)
    return PoolExplanation(pool.name, cls.name, pool.nodes, f"{per_node} per node", fits, tuple(facts), here,
                           tuple(matching))


def _matching_devices(cels: Sequence[str], count: int, cls: ClassView) -> str:
    from modelplane.cel.clauses import explain_selector

    names = [d.name for i, d in enumerate(cls.devices)
             if all(explain_selector(e, cls.device_view(i)).matched for e in cels)]
    return (f"matches device {', '.join(names)} ({count} per pod)" if names
            else f"matches as the scheduler resolved it ({count} per pod)")


def _request_facts(engine: str, member: int, role: str, requests: Sequence[RequestShape], cls: ClassView,
                   clusters: Mapping[str, ClusterView], scheduler_says: str) -> list[Fact]:
    """Per request of a member that does not match the class: each device kind's first refusing
    clause and the class's value for what it reads, or the count the device kind lacks."""
    from modelplane.cel import CelError
    from modelplane.cel.clauses import explain_selector

    out = []
    for request in requests:
        cels, count, name = request.cels, request.count, request.name
        where = f"engine {engine} member {member} ({role}) request {name!r}"
        reasons = []
        matched_kind = None
        for i, device in enumerate(cls.devices):
            try:
                verdicts = [explain_selector(e, cls.device_view(i)) for e in cels]
            except CelError as exc:
                reasons.append(f"the selector does not compile: {exc}")
                break
            failed = next((v for v in verdicts if not v.matched), None)
            if failed is not None:
                reasons.append(f"device {device.name}: {failed.describe()}")
            elif device.count < count:
                reasons.append(f"device {device.name} matches, but the class has {device.count} per node and the "
                               f"request asks for {count}")
            else:
                matched_kind = device.name
        if matched_kind is not None:
            out.append(_ok("device", f"{where}: matches device {matched_kind} ({count} per pod)"))
            continue
        detail = f"{where}: " + ("; ".join(reasons) or scheduler_says)
        most = max((d.count for d in cls.devices), default=0)
        too_many = reasons and all(" per node and the request asks for " in r for r in reasons)
        fix = (f"ask for at most {most} per pod (the class's devices per node), or spread the engine over several "
               f"nodes (a Leader and Workers); {_device_fix(cels, count, cls.name, clusters)}" if too_many
               else _device_fix(cels, count, cls.name, clusters))
        out.append(_fails("device", detail, fix))
    if all(f.ok for f in out):
        # Each request matches some device alone, but not all together (the scheduler takes
        # devices greedily, request by request): its own words say which.
        out.append(_fails("device", f"engine {engine} member {member} ({role}): {scheduler_says}",
                        "ask for fewer devices per pod, or use a class with more devices per node"))
    return out


def _device_fix(cels: Sequence[str], count: int, class_name: str, clusters: Mapping[str, ClusterView]) -> str:
    """Where a request would match: pools of other classes that satisfy it, or that none does.
    Judged once per class (a thousand pools of one class are one evaluation)."""
    from modelplane.cel import CelError
    from modelplane.cel.clauses import explain_selector

    by_class: dict[str, bool] = {}
    fitting: list[str] = []
    for name, cluster in clusters.items():
        for pool in cluster.pools:
            cls = pool.cls
            if cls.name == class_name:
                continue
            if cls.name not in by_class:
                try:
                    by_class[cls.name] = any(
                        d.count >= count and all(explain_selector(e, cls.device_view(i)).matched for e in cels)
                        for i, d in enumerate(cls.devices))
                except CelError:
                    return "fix the selector (it does not compile)"
            if by_class[cls.name]:
                fitting.append(f"{name}/{pool.name} (class {cls.name})")
    if fitting:
        return f"these pools' classes satisfy the request: {_some(fitting)}; or change the selector"
    return "no pool of the fleet satisfies the request: change the selector to what a class declares, or add a class " \
           "and pool that has it"


def _some(names: Sequence[str], most: int = 5) -> str:
    """The first `most` names, and how many more."""
    more = f", and {len(names) - most} more" if len(names) > most else ""
    return ", ".join(names[:most]) + more


def format_explanation(e: Explanation) -> str:
    """The text `modelplane explain` prints: the deployment, then per cluster its verdict and facts,
    per pool its facts (a failing one marked `x` with its fix under it), budgets and verdicts."""
    out = [f"{e.namespace}/{e.name}: {e.placed} of {e.desired} replicas placed"]
    out += [f"  {c}" for c in e.conditions]
    out += [f"  note: {n}" for n in e.notes]
    for c in e.clusters:
        out.append("")
        out.append(f"cluster {c.cluster}: {c.verdict}")
        out += _facts(c.facts, "  ")
        for p in c.pools:
            used = f"; this plan runs {_some(p.placed_here)} there" if p.placed_here else ""
            out.append(f"  pool {p.pool} (class {p.class_name}, {counted(p.nodes, 'node')}, {p.devices}): "
                       f"{p.verdict}{used}")
            out += _facts(p.facts, "    ")
    if e.budgets:
        out.append("")
        out += e.budgets
    if e.verdicts:
        out.append("")
        out += [f"unplaced {v}" for v in e.verdicts]
    return "\n".join(out) + "\n"


def _facts(facts: Sequence[Fact], indent: str) -> list[str]:
    out = []
    for f in facts:
        out.append(f"{indent}{'ok' if f.ok else 'x '} {f.check}: {f.detail}")
        if f.fix:
            out.append(f"{indent}   fix: {f.fix}")
    return out
