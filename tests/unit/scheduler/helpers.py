"""Short builders for scheduler scenarios: reference-style YAML fleets, previous
placements, and views of the result."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from modelplane.api import load_manifest_text
from modelplane.naming import replica_name
from modelplane.scheduler import (DeploymentPlacement, EnginePlacement, FleetPlacement,
                                  PlacedReplica, place_fleet)
from modelplane.scheduler.fleetgen import (cluster, deployment, device, engine, gpu_class,  # noqa: F401
                                           inference_class, mem_at_least, member, model_cache,
                                           pool, request, standalone, taint, to_yaml)


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
