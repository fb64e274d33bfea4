"""Fleet scheduler: where every replica of every ModelDeployment runs.

`place_fleet` is a pure function of the fleet, the previous placement, observed pool
sizes and cluster outages. One pass, one cycle state (scheduler.cycle): compile
(`pipeline.start`), then the stages of `pipeline.STAGES`, in this order:

 1. compile          — clusters (observed sizes, closed clusters), each deployment's
                       shape and policy, its plugin bindings (plugins.REGISTRY);
 2. retain           — previous replicas are kept if their cluster exists, no candidate
                       filter refuses it, their identity is unique, and every `keep` hook
                       agrees (taints: NoExecute evicts; device fit: pins still match);
 3. failover: set aside — replicas on evacuated clusters leave the count;
 4. preferences: settle moves — moves whose new replica is ready end;
 5. scale down       — surplus leaves: least preferred tier, most-loaded cluster, later
                       name, highest index;
 6. preferences: rejoin — new halves of moves in flight count again;
 7. budgets: trim kept — kept replicas a FleetBudget cannot pay for are dropped;
 8. ledger           — capacity minus every kept replica; overdrawn pools drop kept ones;
 9. preferences: end broken moves — a move that lost a half ends;
10. budgets: recharge kept — the budgets pay for what the ledger kept;
11. fill             — deployments in (namespace, name) order, one replica at a time:
                       filter -> score -> admit -> reserve over the plugins (scheduler.fill);
12. preferences: move back — replicas return to a more preferred tier, new one first;
13. failover: link   — set-aside replicas are paired with their replacements;
14. feasibility      — a verdict per unplaced replica, from the kinds of the fill's reasons;
15. results          — replicas, conditions, policy status per deployment;
16. budgets: status  — every FleetBudget's use and refusals.

The plugins, in registry order (each one file in scheduler/plugins/, device-fit a package):
selectors and cache-staging (candidate filters), outages and taints (filters; taints also
evict on keep), tiers (filter, score), spread (admit, score, reserve, admit_move), device-fit
(keep, reserve: the engines on the pools' capacity; never, scale_up for feasibility),
gang-zones (keep, reserve, scale_up: a gang copy's nodes from one zone of its pools), budgets
(reserve), spread-before-pack (the base score: fewest replicas of the deployment, then name;
its `queue` hook, a lazy heap, serves the fill when it is the only score). The framework
imports none of them: `place_fleet` hands the registry (plugins.REGISTRY) to pipeline.start.

See docs/scheduler.md for the rules and where they diverge from the reference.
"""

from __future__ import annotations

from collections.abc import Container, Mapping
from typing import TYPE_CHECKING

from modelplane.api import Fleet, ModelDeployment
from modelplane.gcpause import gc_paused

from . import pipeline, plugins
from .ledger import ACCOUNTING_MODES, DEFAULT_ACCOUNTING, Ledger, ObservedCapacity, ObservedPool
from .matching import Matcher, MemberMatch
from .placement_types import (
    Condition,
    DeploymentPlacement,
    EnginePlacement,
    FleetPlacement,
    PlacedReplica,
    PlacementFormatError,
    ResolvedRequest,
    Unplaced,
)
from .shape import Outage, compile_classes, compile_deployment

if TYPE_CHECKING:  # annotations only: modelplane.cel is imported when first needed (below)
    from modelplane.cel import SelectorCache

__all__ = [
    "ACCOUNTING_MODES", "DEFAULT_ACCOUNTING", "EVERY_DEPLOYMENT", "Condition", "DeploymentPlacement",
    "EnginePlacement", "FleetPlacement",
    "ObservedCapacity", "ObservedPool", "Outage", "PlacedReplica", "PlacementFormatError", "ResolvedRequest",
    "Unplaced", "candidate_clusters", "place_fleet", "resolve_member_requests",
]


class _Every:
    """Every deployment (`place_fleet(explain=EVERY_DEPLOYMENT)`)."""

    def __contains__(self, key: object) -> bool:
        return True


EVERY_DEPLOYMENT: Container[tuple[str, str]] = _Every()


def place_fleet(fleet: Fleet, previous: FleetPlacement | None = None, accounting: str = DEFAULT_ACCOUNTING,
                observed: ObservedCapacity | None = None, selector_cache: SelectorCache | None = None,
                outages: Mapping[str, Outage] | None = None,
                explain: Container[tuple[str, str]] = ()) -> FleetPlacement:
    """Where every replica runs. For a replica left unplaced, why every cluster refused it is
    summarized (scheduler.refusals); the deployments `explain` names, by (namespace, name),
    also keep every cluster's reason (`Refusals.by_cluster`, what `plan --explain` prints)."""
    # Placement allocates many small, short-lived objects while the loaded fleet (a million
    # objects at 1,000 clusters) sits in the oldest generation, which every full collection
    # rescans; nothing placement builds is cyclic, so the collector waits until it ends.
    with gc_paused():
        return place_fleet_with_ledger(fleet, previous, accounting, observed, selector_cache, outages,
                                       explain=explain)[0]


def place_fleet_with_ledger(fleet: Fleet, previous: FleetPlacement | None = None,
                            accounting: str = DEFAULT_ACCOUNTING,
                            observed: ObservedCapacity | None = None,
                            selector_cache: SelectorCache | None = None,
                            outages: Mapping[str, Outage] | None = None,
                            explain: Container[tuple[str, str]] = ()) -> tuple[FleetPlacement, Ledger]:
    """`place_fleet`, also returning the final ledger (free capacity per pool) so tests
    and reports can audit it. `outages`: clusters that take no new replica, and those whose
    replicas are re-placed elsewhere (scheduler.failover)."""
    if accounting not in ACCOUNTING_MODES:
        raise ValueError(f"accounting must be one of {ACCOUNTING_MODES}, not {accounting!r}")
    cycle = pipeline.start(fleet, Matcher(_selector_cache(selector_cache)), accounting, previous, observed,
                           outages or {}, registry=plugins.REGISTRY, explain=explain)
    pipeline.run(cycle)
    return cycle.placement(), cycle.ledger


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
    """Per deployment, the clusters a replica of it can ever be placed or kept on: no
    candidate filter refuses them (both selectors match and, when it uses a ModelCache,
    the cache can be staged there). The scheduler's own filter, before taints and capacity."""
    cycle = pipeline.start(fleet, Matcher(_selector_cache(None)), DEFAULT_ACCOUNTING, None, None, {},
                           registry=plugins.REGISTRY)
    out = {st.key: [c.name for c in cycle.filtered(st).candidates] for st in cycle.deployments}
    pipeline.release(cycle)
    return out
