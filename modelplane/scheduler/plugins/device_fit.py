"""device-fit: the replica's engines must fit the cluster's pools (semantics §2.4-2.6,
modelplane.scheduler.placement): each member's device requests against each pool's class,
one pool per engine (first fit, in published order) or, failing that, pools sharing a
fabric domain; capacity from the ledger, in nodes or devices.

* keep: a kept replica's pins must still match the current spec (capacity is not
  checked: an existing replica is an input); it charges what its current spec costs.
* reserve: place on the ledger (or a trial of it) and record the engines. A cluster that
  refused a demand refuses it for the rest of the pass (fill only charges), so it is not
  tried again; why is worked out only if someone reads it, once per distinct state.
"""

from __future__ import annotations

from typing import Self

from modelplane.scheduler.cycle import Binding, Cycle, DeploymentState, Keeping, Reservation
from modelplane.scheduler.ledger import Trial
from modelplane.scheduler.placement import PLUGIN, place_replica, resolve_retained
from modelplane.scheduler.reasons import REJECTED, Deferred, Reason, Refusal
from modelplane.scheduler.shape import ClusterView


class DeviceFit(Binding):
    name = PLUGIN

    def __init__(self, cycle: Cycle, st: DeploymentState) -> None:
        self.cycle, self.st = cycle, st
        self.refuses_key = st.engines_id
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
            hit = self._refusing[cluster.sig_id] = self.cycle.refusing(self.cycle.demand(self.st, cluster))
        return hit

    def refuses_already(self, cluster: ClusterView) -> bool:
        return cluster.name in self._refused(cluster)

    def reserve(self, r: Reservation) -> Refusal | None:
        cycle, cluster = self.cycle, r.cluster
        refused = self._refused(cluster)
        if cluster.name in refused:
            return Deferred(lambda: self.explain(cluster))
        engines, why = place_replica(cycle.options(self.st, cluster), cluster.name, r.ledger)
        if engines is None:
            refused.add(cluster.name)
            why = why or Reason(REJECTED, self.name, "rejected")
            cycle.explanations[(cluster.name, cycle.charged.get(cluster.name, 0), self.st.engines_id)] = why
            return why
        r.engines = engines
        return None

    def explain(self, cluster: ClusterView) -> Reason:
        """Why the cluster refuses one more replica now: tried on a throwaway trial (a
        refusing cluster is not charged by this deployment afterwards, so the answer is
        the one it gave), once per (cluster, charges so far, engines): the words name the
        engine's requests, which the demand does not."""
        cycle = self.cycle
        key = (cluster.name, cycle.charged.get(cluster.name, 0), self.st.engines_id)
        hit = cycle.explanations.get(key)
        if hit is None:
            _, why = place_replica(cycle.options(self.st, cluster), cluster.name, Trial(cycle.ledger))
            hit = cycle.explanations[key] = why or Reason(REJECTED, self.name, "rejected")
        return hit
