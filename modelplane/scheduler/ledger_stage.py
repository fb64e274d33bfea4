"""Stage `ledger`: capacity left after every kept replica (semantics §2.6).

Free capacity per (cluster, pool) is the observed size if given, else the declared one,
minus every kept replica of every deployment at its current spec's cost, gathered per
pool in (deployment, cluster, index) order: the order a fresh plan placed them. A
previous placement may keep more on a pool than it holds (it was written for more nodes,
or by hand): then the replicas that do not fit are not kept, so no plan ever renders more
than fits, and fill places them again where there is room (docs/scheduler.md, "Overdrawn
pools"). The deployment reports `Overdrawn`.

A pool whose nodes span zones also gets one state per zone (ledger.PoolKey (cluster, pool,
zone)), sized by the nodes the zone is sure to hold, which the kept gang copies charge as the
gang-zones plugin assigned them (its `keep`); a zone its kept gangs overdraw drops them the same
way.
"""

from __future__ import annotations

from .conditions import overdrawn
from .cycle import Cycle
from .ledger import Ledger, PoolKey, Trial, Usage, ledger_key
from .reasons import OVERDRAWN, Reason
from .shape import ClusterView


def build(cycle: Cycle) -> None:
    ledger = _charged(cycle)
    pools = ledger.overdrawn()
    while pools:
        _drop_overdraw(cycle, set(pools))
        ledger = _charged(cycle)
        pools = ledger.overdrawn()
    cycle.ledger = ledger
    for st in cycle.deployments:
        if st.overdrawn:
            st.conditions.append(overdrawn(st.overdrawn))


def _empty(cycle: Cycle) -> Ledger:
    ledger = Ledger(cycle.accounting)
    for cluster in cycle.clusters.values():
        for pool in cluster.pools:
            ledger.add_pool((cluster.name, pool.name), pool.nodes, tuple(d.count for d in pool.cls.devices), pool.free)
        add_zones(ledger, cluster)
    return ledger


def add_zones(ledger: Ledger, cluster: ClusterView) -> None:
    """A state per zone of each of the cluster's pools whose nodes span zones: as many whole
    nodes as the zone is sure to hold, or the whole pool where no zone is capped below it."""
    for pool in cluster.pools:
        if pool.zoned:
            per_node = tuple(d.count for d in pool.cls.devices)
            nodes = pool.nodes if pool.zone_nodes is None else pool.zone_nodes
            for zone in pool.zones:
                ledger.add_pool((cluster.name, pool.name, zone), nodes, per_node)


def _charged(cycle: Cycle) -> Ledger:
    ledger = _empty(cycle)
    per_pool: dict[PoolKey, list[Usage]] = {}
    for st in cycle.deployments:
        for (cluster, _), charges in sorted(st.charges.items()):
            for part, usages in charges:
                per_pool.setdefault(ledger_key(cluster, part), []).extend(usages)
    ledger.charge_retained(per_pool)
    return ledger


def _drop_overdraw(cycle: Cycle, pools: set[PoolKey]) -> None:
    """On each overdrawn pool, keep the kept replicas that fit one at a time in
    (deployment, cluster, index) order, as a fresh plan would place them; drop the rest
    (a replica fits only if all its charges on overdrawn pools fit)."""
    probe = _empty(cycle)
    unit = cycle.unit
    for st in cycle.deployments:
        kept = {(r.cluster, r.index): r for r in st.retained}
        for ident, charges in sorted(st.charges.items()):
            cluster = ident[0]
            trial = Trial(probe)
            short: tuple[int, str] | None = None
            for part, usages in charges:
                key = ledger_key(cluster, part)
                if key in pools:
                    missing = trial.state(key).try_take(usages)
                    if missing and short is None:
                        short = (missing, part if isinstance(part, str) else f"{part[0]} zone {part[1]}")
            if short is None:
                trial.commit()
                continue
            rep = kept[ident]
            amount = f"{short[0]} {unit if short[0] != 1 else unit.rstrip('s')}"
            st.drop(rep, Reason(OVERDRAWN, "ledger",
                                f"pool {short[1]} of cluster {cluster} holds less than the previous placement "
                                f"kept there (short by {amount}): not kept, placed again where it fits"))
            st.overdrawn.append(f"{rep.name} ({cluster}#{rep.index}, pool {short[1]}, short by {amount})")
