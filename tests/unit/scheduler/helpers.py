"""Short builders for scheduler scenarios: reference-style YAML fleets, previous
placements, and views of the result."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from modelplane.api import load_manifest_text
from modelplane.naming import replica_name
from modelplane.scheduler import DeploymentPlacement, EnginePlacement, FleetPlacement, PlacedReplica, place_fleet
from tests.manifests import (  # noqa: F401
    cluster,
    deployment,
    device,
    engine,
    fleet_budget,
    gpu_class,
    inference_class,
    mem_at_least,
    member,
    model_cache,
    placement_policy,
    pool,
    preferences,
    previous_from,
    request,
    spread,
    standalone,
    taint,
    tier,
    to_yaml,
)


def load(docs: list[dict]) -> Any:
    return load_manifest_text(to_yaml(docs))


def prev(*entries: tuple, namespace: str = "default") -> FleetPlacement:
    """prev(("dep", "cluster", index, {"engine": "pool" | ["pool", ...]}, name?), ...)"""
    deps: dict[str, list[PlacedReplica]] = {}
    for entry in entries:
        dep, clus, index, engines = entry[:4]
        name = entry[4] if len(entry) > 4 else replica_name(dep, clus, index)
        eng = {}
        for e, pools in engines.items():
            pools = [pools] if isinstance(pools, str) else list(pools)
            eng[e] = EnginePlacement(pools[0], tuple(pools))
        deps.setdefault(dep, []).append(PlacedReplica(name, index, clus, eng))
    return FleetPlacement([DeploymentPlacement(namespace, d, len(r), r)
                           for d, r in sorted(deps.items())])


def plan(docs: list[dict], previous: FleetPlacement | None = None, accounting: str = "Node",
         observed: dict | None = None) -> FleetPlacement:
    return place_fleet(load(docs), previous=previous, accounting=accounting, observed=observed)


def of(fp: FleetPlacement, name: str, namespace: str = "default") -> DeploymentPlacement:
    dp = fp.find(namespace, name)
    assert dp is not None, f"{namespace}/{name} not in placement"
    return dp


def where(fp: FleetPlacement, name: str, namespace: str = "default") -> list[str]:
    """Placed replicas as "cluster#index", in result order (cluster, index)."""
    return [f"{r.cluster}#{r.index}" for r in of(fp, name, namespace).replicas]


def pools_of(fp: FleetPlacement, name: str, engine_name: str = "main") -> list[tuple[str, ...]]:
    return [r.engines[engine_name].member_pools for r in of(fp, name).replicas]


def reason(fp: FleetPlacement, name: str) -> str:
    return of(fp, name).conditions[0].reason


@dataclass
class Case:
    name: str
    docs: list[dict]
    want: dict[str, list[str]]                       # deployment -> ["cluster#index", ...]
    previous: FleetPlacement | None = None
    accounting: str = "Node"
    reasons: dict[str, str] = field(default_factory=dict)   # deployment -> condition reason
    pools: dict[str, list[tuple[str, ...]]] = field(default_factory=dict)  # dep -> main's member pools
    observed: dict | None = None


def check(case: Case) -> FleetPlacement:
    fp = plan(case.docs, case.previous, case.accounting, case.observed)
    for dep, want in case.want.items():
        assert where(fp, dep) == want, f"{case.name}: {dep} placed {where(fp, dep)}, want {want}"
    for dep, want in case.reasons.items():
        assert reason(fp, dep) == want, f"{case.name}: {dep} reason {reason(fp, dep)}, want {want}"
    for dep, want in case.pools.items():
        assert pools_of(fp, dep) == want, f"{case.name}: {dep} pools {pools_of(fp, dep)}, want {want}"
    return fp


# Common shapes ------------------------------------------------------------------

H100 = gpu_class("h100", 1, "81559Mi")


def gang(leader_gpus: int | None = 8, worker_nodes: int = 2, worker_gpus: int = 8,
         copies: int = 1, name: str = "main") -> dict:
    leader = (member("Leader", request("gpu", leader_gpus, mem_at_least(40)))
              if leader_gpus else member("Leader"))
    worker = member("Worker", request("gpu", worker_gpus, mem_at_least(40)), nodes=worker_nodes)
    return engine(name, leader, worker, copies=copies)


# Placement policies (issue 14) ---------------------------------------------------


def cond(fp: FleetPlacement, name: str, type_: str, namespace: str = "default") -> tuple[str, str]:
    """(status, reason) of a deployment's condition of that type."""
    c = of(fp, name, namespace).condition(type_)
    assert c is not None, f"{namespace}/{name} has no {type_} condition"
    return (c.status, c.reason)


def verdicts(fp: FleetPlacement, name: str, namespace: str = "default") -> list[str]:
    return [u.feasibility.verdict if u.feasibility else "" for u in of(fp, name, namespace).unplaced]


@dataclass
class PolicyCase:
    """A named scenario: fleet, expected placements, and per deployment the expected
    (status, reason) of conditions and the verdict of every unplaced replica."""

    name: str
    docs: list[dict]
    want: dict[str, list[str]]
    conditions: dict[str, dict[str, tuple[str, str]]] = field(default_factory=dict)
    verdicts: dict[str, list[str]] = field(default_factory=dict)
    previous: FleetPlacement | None = None
    accounting: str = "Node"
    observed: dict | None = None
    namespace: str = "default"

    def __str__(self) -> str:
        return self.name


def check_policy(case: PolicyCase) -> FleetPlacement:
    fp = plan(case.docs, case.previous, case.accounting, case.observed)
    ns = case.namespace
    for dep, want in case.want.items():
        got = [f"{r.cluster}#{r.index}" for r in of(fp, dep, ns).replicas]
        assert got == want, f"{case.name}: {dep} placed {got}, want {want}"
    for dep, conds in case.conditions.items():
        for type_, want_c in conds.items():
            assert cond(fp, dep, type_, ns) == want_c, f"{case.name}: {dep} {type_}: {of(fp, dep, ns).condition(type_)}"
    for dep, want_v in case.verdicts.items():
        got_v = [u.feasibility for u in of(fp, dep, ns).unplaced]
        assert verdicts(fp, dep, ns) == want_v, f"{case.name}: {dep} verdicts {got_v}"
    return fp


def replan(docs: list[dict], previous: FleetPlacement | None, accounting: str = "Node",
           not_ready: tuple[str, ...] = ()) -> FleetPlacement:
    """One more plan from the JSON of the previous one (what `--previous` reads), with
    some replicas marked `"ready": false`."""
    return plan(docs, previous_from(previous, not_ready) if previous is not None else None, accounting)
