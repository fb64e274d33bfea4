"""Fleet scheduler: where every replica of every ModelDeployment runs.

`place_fleet` is a pure function of the fleet, the previous placement and (optionally)
observed pool sizes. One fleet-wide pass:

1. retain   — every deployment keeps the previous replicas that still fit their pins;
2. scale down — surplus replicas leave the most-loaded clusters first;
3. ledger   — pool capacity minus everything kept, at each spec's current cost;
4. fill     — deployments in (namespace, name) order, one replica at a time, onto the
              eligible cluster with the fewest replicas of that deployment.

See docs/scheduler.md for the rules and where they diverge from the reference.
"""

from __future__ import annotations

from typing import Any, Mapping

from .conditions import replicas_scheduled
from .matching import Matcher, MemberMatch, ResolvedRequest
from .phases import Context, build_ledger, fill, retain, scale_down
from .shape import compile_clusters, compile_deployment
from .types import (
    Condition,
    DeploymentPlacement,
    EnginePlacement,
    FleetPlacement,
    PlacedReplica,
    PlacementFormatError,
    Unplaced,
)

ACCOUNTING_MODES = ("Device", "Node")

__all__ = [
    "ACCOUNTING_MODES", "Condition", "DeploymentPlacement", "EnginePlacement", "FleetPlacement",
    "PlacedReplica", "PlacementFormatError", "ResolvedRequest", "Unplaced", "place_fleet",
    "resolved_requests",
]


def place_fleet(fleet: Any, previous: FleetPlacement | None = None, accounting: str = "Device",
                observed: Mapping[str, Mapping[str, int]] | None = None,
                selector_cache: Any | None = None) -> FleetPlacement:
    if accounting not in ACCOUNTING_MODES:
        raise ValueError(f"accounting must be one of {ACCOUNTING_MODES}, not {accounting!r}")
    ctx = Context(compile_clusters(fleet, observed), Matcher(selector_cache), accounting)
    shapes = [compile_deployment(fleet, key, fleet.deployments[key])
              for key in sorted(fleet.deployments)]
    states = []
    for shape in shapes:
        prev = previous.find(shape.namespace, shape.name) if previous is not None else None
        st = retain(ctx, shape, prev)
        scale_down(st)
        states.append(st)
    ledger = build_ledger(ctx, states)
    for st in states:
        fill(ctx, st, ledger)
    result = []
    for st in states:
        shape = st.shape
        replicas = sorted(st.retained + st.placed, key=lambda r: (r.cluster, r.index))
        cond = replicas_scheduled(shape.desired, len(replicas), st.candidates, shape.invalid)
        result.append(DeploymentPlacement(shape.namespace, shape.name, shape.desired, replicas,
                                          [cond], st.unplaced, st.dropped))
    return FleetPlacement(result)


def resolved_requests(fleet: Any, namespace: str, deployment: str, engine: str,
                      member_index: int, pool_cluster: str, pool: str,
                      selector_cache: Any | None = None) -> list[ResolvedRequest]:
    """The DRA requests a placed member carries on its pool (what a ResourceClaimTemplate
    needs): same matching as the scheduler. Empty for a claimless member."""
    shape = compile_deployment(fleet, (namespace, deployment), fleet.deployments[(namespace, deployment)])
    eng = shape.engine(engine)
    if eng is None:
        raise KeyError(f"engine {engine!r} not in {namespace}/{deployment}")
    cluster = compile_clusters(fleet)[pool_cluster]
    pv = cluster.pool(pool)
    if pv is None:
        raise KeyError(f"pool {pool!r} not published by cluster {pool_cluster!r}")
    match = Matcher(selector_cache).match(eng.members[member_index], pv.cls)
    return list(match.resolved) if isinstance(match, MemberMatch) else []
