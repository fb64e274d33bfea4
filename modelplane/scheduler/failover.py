"""Failover: replicas leave a cluster that is unreachable or unready, new ones first.

The scheduler stays a pure function: *when* a cluster counts as failed is decided outside
(modelplane.observe.health, with a clock and a grace period) and arrives as `outages`:

* a cluster with an `Outage` takes no new replica (the outages plugin, like a taint);
* when the outage says `evacuate` (its grace period is over), every replica on it is *set
  aside* (stage `failover: set aside`): it stays in the placement (so its objects are
  neither deleted on a cluster that cannot answer nor counted as serving) and a
  replacement is placed elsewhere by the ordinary fill. The pair is recorded in the
  deployment's `failover` block (stage `failover: link`);
* a set-aside replica is removed by a later plan once its replacement is in the previous
  placement and not marked `"ready": false`, and its cluster can be reached (so the delete
  can happen). A replica whose replacement could not be placed or is gone comes back into
  the count as soon as its cluster is no longer evacuated: nothing moves back by itself;
  returning to a preferred cluster is clusterPreferences' job, with its hysteresis;
* a cluster still holding a set-aside replica takes no new replica until it is gone (its
  index stays reserved, and a cluster that just failed is not the first place to put work).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from .conditions import failed_over
from .cycle import Cycle, Key
from .placement_types import Failover, FleetPlacement, PlacedReplica
from .reasons import FAILED_OVER, Reason
from .shape import Outage

__all__ = ["ASIDE", "Outage", "SetAside", "closed_clusters", "link", "set_aside"]


@dataclass
class SetAside:
    replicas: list[tuple[PlacedReplica, Failover]] = field(default_factory=list)


ASIDE = Key[SetAside]("failover")


def closed_clusters(previous: FleetPlacement | None, outages: Mapping[str, Outage]) -> dict[str, str]:
    """Clusters that take no new replica: every outage, and every cluster still holding a
    replica set aside by an earlier plan."""
    closed = {name: o.reason for name, o in outages.items()}
    for dep in previous.deployments if previous is not None else []:
        for rec in dep.failover:
            closed.setdefault(rec.cluster, f"failover of {rec.from_} still in flight "
                                           f"(it leaves once {rec.to or 'a replacement'} is ready)")
    return closed


def set_aside(cycle: Cycle) -> None:
    """Take the kept replicas of evacuated clusters, and those of earlier failovers still in
    flight, out of the count; drop those whose replacement is ready."""
    previous = cycle.previous.by_key() if cycle.previous is not None else {}
    outages = cycle.outages
    for st in cycle.deployments:
        prev = previous.get(st.key)
        out = st.put(ASIDE, SetAside())
        records = {rec.from_: rec for rec in prev.failover} if prev is not None else {}
        not_ready = prev.policy.not_ready if prev is not None and prev.policy is not None else frozenset()
        names = {r.name for r in st.retained}
        for rep in sorted(st.retained, key=lambda r: r.name):
            outage = outages.get(rep.cluster)
            rec = records.get(rep.name)
            live_to = rec.to if rec is not None and rec.to in names else None
            if not (outage is not None and outage.evacuate) and live_to is None:
                continue                        # healthy, and nothing replaces it: an ordinary replica
            if live_to is not None and live_to not in not_ready and (outage is None or outage.reachable):
                st.drop(rep, Reason(FAILED_OVER, "failover", f"failed over: {live_to} replaces it and is ready"))
                continue
            st.set_aside(rep)
            out.replicas.append((rep, Failover(rep.name, rep.cluster, live_to)))


def link(cycle: Cycle) -> None:
    """Pair set-aside replicas without a replacement with the replicas this plan placed,
    and report them (`FailedOver`)."""
    for st in cycle.deployments:
        aside = st.get(ASIDE)
        if aside is None or not aside.replicas:
            continue
        used = {rec.to for _, rec in aside.replicas if rec.to}
        fresh = [r for r in sorted(st.placed, key=lambda r: r.name) if r.name not in used]
        for i, (rep, rec) in enumerate(aside.replicas):
            if rec.to is None and fresh:
                aside.replicas[i] = (rep, Failover(rec.from_, rec.cluster, fresh.pop(0).name))
        st.conditions.append(failed_over([
            (rep.name, rep.cluster, cycle.outages[rep.cluster].reason if rep.cluster in cycle.outages
             else "its cluster is back", rec.to) for rep, rec in aside.replicas]))
