"""The pipeline: the named stages of one placement pass, in the order they run, and the
compile step that sets up the cycle. Stages are fleet-level rules; the per-cluster rules
are the plugins the `retain` and `fill` stages run: a registry handed to `start` (the
scheduler's is plugins.REGISTRY, which place_fleet passes; the framework imports no plugin)."""

from __future__ import annotations

from collections.abc import Callable, Container, Mapping, Sequence
from dataclasses import dataclass

from modelplane.api import Fleet

from . import failover, feasibility, fill, fleet_budgets, ledger_stage, preferences, results, retain
from .cycle import Cycle, DeploymentState, Plugin
from .ledger import ObservedCapacity
from .matching import Matcher
from .placement_types import FleetPlacement
from .policy import compile_policy
from .shape import Outage, compile_clusters, compile_deployment


@dataclass(frozen=True)
class Stage:
    name: str
    run: Callable[[Cycle], None]


STAGES: tuple[Stage, ...] = (
    Stage("retain", retain.retain),
    Stage("failover: set aside", failover.set_aside),
    Stage("preferences: settle moves", preferences.settle),
    Stage("scale down", retain.scale_down),
    Stage("preferences: rejoin", preferences.rejoin),
    Stage("budgets: trim kept", fleet_budgets.trim_kept),
    Stage("ledger", ledger_stage.build),
    Stage("preferences: end broken moves", preferences.end_broken),
    Stage("budgets: recharge kept", fleet_budgets.recharge_kept),
    Stage("fill", fill.fill),
    Stage("preferences: move back", preferences.move_back),
    Stage("failover: link", failover.link),
    Stage("feasibility", feasibility.assess),
    Stage("results", results.build),
    Stage("budgets: status", fleet_budgets.report),
)


def start(fleet: Fleet, matcher: Matcher, accounting: str, previous: FleetPlacement | None,
          observed: ObservedCapacity | None, outages: Mapping[str, Outage],
          *, registry: Sequence[Plugin],
          explain: Container[tuple[str, str]] = ()) -> Cycle:
    """Compile: the clusters (observed sizes, closed clusters), every deployment's shape and
    policy in (namespace, name) order, and each one's bindings of the `registry`'s plugins.
    `explain`: the deployments (by key) whose every cluster's reason is kept.
    ValueError when no plugin of the registry places engines (a replica needs its engines)."""
    if not any(plugin.places_engines for plugin in registry):
        raise ValueError("no plugin of the registry places engines (Binding.places_engines): "
                         f"{', '.join(p.name for p in registry) or 'none'}")
    clusters = compile_clusters(fleet, observed, failover.closed_clusters(previous, outages))
    cycle = Cycle(fleet, clusters, matcher, accounting, previous=previous, outages=outages, observed=observed,
                  explain=explain)
    for key in sorted(fleet.deployments):
        dep = fleet.deployments[key]
        cycle.deployments.append(DeploymentState(compile_deployment(fleet, key, dep),
                                                 policy=compile_policy(fleet, key, dep)))
    for st in cycle.deployments:        # after every deployment exists: bindings may look at all
        st.engines_id = cycle.engines_id(st.shape)
        st.bind(b for plugin in registry if (b := plugin.bind(cycle, st)) is not None)
        for b in st.hooks["desired"]:
            st.desired = b.desired(st.desired)
    return cycle


def run(cycle: Cycle) -> Cycle:
    for stage in STAGES:
        stage.run(cycle)
    return release(cycle)


def release(cycle: Cycle) -> Cycle:
    """Bindings point back at their cycle and deployment (and deferred reasons at their
    binding): let go of them, so that nothing the pass built is cyclic and reference
    counting frees it, with no collection scanning the loaded fleet to find it."""
    for st in cycle.deployments:
        st.bind(())
        st.refused.clear()
        st.attempted.clear()
        st.known_other.clear()
    return cycle
