"""device-fit: the replica's engines must fit the cluster's pools (semantics §2.4-2.6, the
rules in `fit`): each member's device requests against each pool's class, one pool per
engine (first fit, in published order) or, failing that, pools sharing a fabric domain;
capacity from the ledger, in nodes or devices.

* keep: a kept replica's pins must still match the current spec (capacity is not
  checked: an existing replica is an input); it charges what its current spec costs.
* reserve: place on the ledger (or a trial of it) and record the engines (it is the plugin
  that `places_engines`). A cluster that refused a demand refuses it for the rest of the
  pass (fill only charges), so it is not tried again; why is worked out only if someone
  reads it, once per distinct state.
* never / scale_up (feasibility): whether no pool can ever host an engine, and the fewest
  nodes to add to the pools so that one more replica's engines place.

What it remembers across deployments lives in the cycle under its own key (`FIT`): the
capacity-free engine options per (engines, pool signature), the demand they make, the
clusters refusing each demand, and the words of each refusal.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Self

from modelplane.scheduler.cycle import Binding, Cycle, DeploymentState, Keeping, Key, Reservation
from modelplane.scheduler.growth import ScaleUp
from modelplane.scheduler.ledger import Trial
from modelplane.scheduler.matching import Matcher
from modelplane.scheduler.reasons import CAPACITY, REJECTED, Deferred, Reason, Refusal
from modelplane.scheduler.shape import ClusterView

from .fit import (
    PLUGIN,
    EngineOptions,
    demand_key,
    engine_options,
    grow_engine,
    never_fits,
    place_engine,
    place_replica,
    resolve_retained,
)


@dataclass
class FitMemo:
    """Device fit's memo tables for one pass, each keyed by what its answer depends on."""

    matcher: Matcher
    _options: dict[tuple[int, int], list[EngineOptions]] = field(default_factory=dict)
    _demands: dict[tuple[int, int], tuple[object, ...]] = field(default_factory=dict)
    _refusing: dict[tuple[object, ...], set[str]] = field(default_factory=dict)
    # (cluster, charges so far, engines) -> why the cluster refuses one more replica
    explanations: dict[tuple[str, int, int], Reason] = field(default_factory=dict)

    def options(self, st: DeploymentState, cluster: ClusterView) -> list[EngineOptions]:
        """Capacity-free placement options of a deployment's engines on a cluster, shared by
        every deployment of the same engines and every cluster of the same pool signature."""
        key = (st.engines_id, cluster.sig_id)
        hit = self._options.get(key)
        if hit is None:
            matcher = self.matcher
            hit = self._options[key] = [engine_options(matcher, e, cluster) for e in st.shape.engines]
        return hit

    def demand(self, st: DeploymentState, cluster: ClusterView) -> tuple[object, ...]:
        """What a cluster's pools would be asked for one replica: equal demands are refused
        alike, whatever the deployment."""
        key = (st.engines_id, cluster.sig_id)
        hit = self._demands.get(key)
        if hit is None:
            hit = self._demands[key] = demand_key(self.options(st, cluster))
        return hit

    def refusing(self, demand: tuple[object, ...]) -> set[str]:
        """The clusters that refused `demand` during fill: fill only ever charges the
        ledger, so a cluster that refused a demand refuses it for the rest of the pass."""
        hit = self._refusing.get(demand)
        if hit is None:
            hit = self._refusing[demand] = set()
        return hit


FIT = Key[FitMemo]("device-fit")


def memo(cycle: Cycle) -> FitMemo:
    """The cycle's device-fit memo (gang-zones reads the same options and demands)."""
    return cycle.get(FIT) or cycle.put(FIT, FitMemo(cycle.matcher))


class DeviceFit(Binding):
    name = PLUGIN
    places_engines = True

    def __init__(self, cycle: Cycle, st: DeploymentState) -> None:
        self.cycle, self.st = cycle, st
        self.memo = memo(cycle)
        self.refuses_key = self.scale_up_key = st.engines_id
        # per pool signature of a cluster: the cycle's clusters refusing this engines' demand
        self._refusing: dict[int, set[str]] = {}

    @classmethod
    def bind(cls, cycle: Cycle, st: DeploymentState) -> Self | None:
        return cls(cycle, st)

    def keep(self, kept: Keeping) -> Reason | None:
        engines, charges, why = resolve_retained(self.cycle.matcher, self.st.shape, kept.cluster,
                                                 kept.previous.engines)
        if engines is None:
            return why
        kept.engines, kept.charges = engines, charges
        return None

    def _refused(self, cluster: ClusterView) -> set[str]:
        hit = self._refusing.get(cluster.sig_id)
        if hit is None:
            hit = self._refusing[cluster.sig_id] = self.memo.refusing(self.memo.demand(self.st, cluster))
        return hit

    def refuses_already(self, cluster: ClusterView) -> bool:
        return cluster.name in self._refused(cluster)

    def reserve(self, r: Reservation) -> Refusal | None:
        cycle, cluster = self.cycle, r.cluster
        refused = self._refused(cluster)
        if cluster.name in refused:
            return Deferred(lambda: self.explain(cluster))
        engines, why = place_replica(self.memo.options(self.st, cluster), cluster.name, r.ledger)
        if engines is None:
            refused.add(cluster.name)
            why = why or Reason(REJECTED, self.name, "rejected", CAPACITY)
            self.memo.explanations[(cluster.name, cycle.charged.get(cluster.name, 0), self.st.engines_id)] = why
            return why
        r.engines = engines
        return None

    def explain(self, cluster: ClusterView) -> Reason:
        """Why the cluster refuses one more replica now: tried on a throwaway trial (a
        refusing cluster is not charged by this deployment afterwards, so the answer is
        the one it gave), once per (cluster, charges so far, engines): the words name the
        engine's requests, which the demand does not."""
        cycle, explanations = self.cycle, self.memo.explanations
        key = (cluster.name, cycle.charged.get(cluster.name, 0), self.st.engines_id)
        hit = explanations.get(key)
        if hit is None:
            _, why = place_replica(self.memo.options(self.st, cluster), cluster.name, Trial(cycle.ledger))
            hit = explanations[key] = why or Reason(REJECTED, self.name, "rejected", CAPACITY)
        return hit

    def never(self, cluster: ClusterView) -> Reason | None:
        return never_fits(self.memo.options(self.st, cluster))

    def scale_up(self, s: ScaleUp) -> bool:
        """Every engine placed on `s.ledger`, adding to its pools the fewest nodes it needs."""
        unit = self.cycle.unit
        engines = {}
        for opts in self.memo.options(self.st, s.cluster):
            placed, _ = place_engine(opts, s.cluster.name, s.ledger, unit)
            if placed is None:
                placed = grow_engine(opts, s, unit)
            if placed is None:
                return False
            engines[opts.engine.name] = placed
        s.engines = engines
        return True


__all__ = ["FIT", "PLUGIN", "DeviceFit", "FitMemo", "memo"]
