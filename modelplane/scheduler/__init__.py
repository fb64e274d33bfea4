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

import gc
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING

from modelplane.api import Fleet, ModelDeployment

from . import failover
from .conditions import overdrawn, replicas_scheduled
from .explain import selector_reason
from .failover import Outage
from .ledger import ACCOUNTING_MODES, DEFAULT_ACCOUNTING, Ledger, ObservedCapacity, ObservedPool
from .matching import Matcher, MemberMatch
from .phases import Context, build_ledger, fill, retain, scale_down
from .policies import PolicyPass
from .shape import compile_classes, compile_clusters, compile_deployment
from .types import (
    Condition,
    DeploymentPlacement,
    EnginePlacement,
    FleetPlacement,
    PlacedReplica,
    PlacementFormatError,
    ResolvedRequest,
    Unplaced,
)

if TYPE_CHECKING:  # annotations only: modelplane.cel is imported when first needed (below)
    from modelplane.cel import SelectorCache

__all__ = [
    "ACCOUNTING_MODES", "DEFAULT_ACCOUNTING", "Condition", "DeploymentPlacement", "EnginePlacement", "FleetPlacement",
    "ObservedCapacity", "ObservedPool", "Outage", "PlacedReplica", "PlacementFormatError", "ResolvedRequest",
    "Unplaced", "candidate_clusters", "place_fleet", "resolve_member_requests",
]


def place_fleet(fleet: Fleet, previous: FleetPlacement | None = None, accounting: str = DEFAULT_ACCOUNTING,
                observed: ObservedCapacity | None = None, selector_cache: SelectorCache | None = None,
                outages: Mapping[str, Outage] | None = None) -> FleetPlacement:
    with _collector_paused():
        return place_fleet_with_ledger(fleet, previous, accounting, observed, selector_cache, outages)[0]


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Placement allocates many small, short-lived tuples while the loaded fleet (a
    million objects at 1,000 clusters) sits in the oldest generation, which every
    full collection rescans: at 1,000 clusters those scans were two thirds of the time
    (issue 15). Nothing placement builds is cyclic, so the collector waits until it ends."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def place_fleet_with_ledger(fleet: Fleet, previous: FleetPlacement | None = None,
                            accounting: str = DEFAULT_ACCOUNTING,
                            observed: ObservedCapacity | None = None,
                            selector_cache: SelectorCache | None = None,
                            outages: Mapping[str, Outage] | None = None) -> tuple[FleetPlacement, Ledger]:
    """`place_fleet`, also returning the final ledger (free capacity per pool) so tests
    and reports can audit it. `outages`: clusters that take no new replica, and those whose
    replicas are re-placed elsewhere (scheduler.failover)."""
    if accounting not in ACCOUNTING_MODES:
        raise ValueError(f"accounting must be one of {ACCOUNTING_MODES}, not {accounting!r}")
    outages = outages or {}
    ctx = Context(compile_clusters(fleet, observed, failover.closed_clusters(previous, outages)),
                  Matcher(_selector_cache(selector_cache)), accounting)
    shapes = [compile_deployment(fleet, key, fleet.deployments[key])
              for key in sorted(fleet.deployments)]
    policies = PolicyPass(fleet, ctx, observed)    # issue 14: spread, tiers, budgets
    states = []
    asides = []
    previous_by_key = previous.by_key() if previous is not None else {}
    for shape in shapes:
        prev = previous_by_key.get(shape.key)
        st = retain(ctx, shape, prev)
        asides.append(failover.set_aside(st, prev, outages))
        policies.before_scale_down(st, prev)
        scale_down(st)
        policies.after_scale_down(st)
        states.append(st)
    policies.trim_budgets(states)
    ledger = build_ledger(ctx, states)
    policies.after_ledger(states)
    for st in states:
        if not policies.fill(ctx, st, ledger):
            fill(ctx, st, ledger)
    policies.move_back(states)
    result = []
    for st, aside in zip(states, asides, strict=True):
        shape = st.shape
        failover.link(st, aside)
        serving = st.retained + st.placed
        replicas = sorted(serving + [r for r, _ in aside.replicas], key=lambda r: (r.cluster, r.index))
        conditions = [replicas_scheduled(shape.desired, len(serving) - policies.surge(st), st.candidates,
                                         shape.invalid)]
        if st.overdrawn:
            conditions.append(overdrawn(st.overdrawn))
        failed_over = failover.condition(aside, outages)
        if failed_over is not None:
            conditions.append(failed_over)
        result.append(DeploymentPlacement(shape.namespace, shape.name, shape.desired, replicas,
                                          conditions, st.unplaced, st.dropped,
                                          failover=[rec for _, rec in aside.replicas]))
    budgets = policies.finish(states, result, ledger)
    return FleetPlacement(result, budgets), ledger


_SHARED_SELECTORS: SelectorCache | None = None


def _selector_cache(given: SelectorCache | None) -> SelectorCache:
    global _SHARED_SELECTORS
    if given is not None:
        return given
    if _SHARED_SELECTORS is None:
        # Deferred: modelplane.cel costs ~0.16 s to import (see shape._compile_error).
        from modelplane.cel import SelectorCache

        _SHARED_SELECTORS = SelectorCache()
    return _SHARED_SELECTORS


def resolve_member_requests(fleet: Fleet, deployment: ModelDeployment, engine: str, member_index: int,
                            class_name: str, selector_cache: SelectorCache | None = None
                            ) -> list[ResolvedRequest]:
    """The DRA requests a member carries on a pool of class `class_name` (what its
    ResourceClaimTemplate needs), by the scheduler's own matching. Empty for a claimless
    member; KeyError if the engine or class is unknown or the member does not match."""
    key = (deployment.metadata.namespace or "default", deployment.metadata.name)
    shape = compile_deployment(fleet, key, deployment)
    eng = shape.engine(engine)
    if eng is None:
        raise KeyError(f"engine {engine!r} not in {key[0]}/{key[1]}")
    classes = compile_classes(fleet, only=class_name)
    if class_name not in classes:
        raise KeyError(f"InferenceClass {class_name!r} not found")
    match = Matcher(_selector_cache(selector_cache)).match(eng.members[member_index], classes[class_name])
    if not isinstance(match, MemberMatch):
        raise KeyError(f"engine {engine!r} member {member_index} does not match class "
                       f"{class_name!r}: {match}")
    return list(match.resolved)


def candidate_clusters(fleet: Fleet) -> dict[tuple[str, str], list[str]]:
    """Per deployment, the clusters a replica of it can ever be placed or kept on: both
    selectors match and, when it uses a ModelCache, the cache can be staged there. The
    scheduler's own filter, before taints and capacity."""
    clusters = compile_clusters(fleet)
    out: dict[tuple[str, str], list[str]] = {}
    for key in sorted(fleet.deployments):
        shape = compile_deployment(fleet, key, fleet.deployments[key])
        out[key] = [name for name, view in clusters.items() if selector_reason(shape, view) is None]
    return out
