"""Stage `ledger`: capacity left after every kept replica (semantics §2.6).

Free capacity per (cluster, pool) is the observed size if given, else the declared one,
minus every kept replica of every deployment at its current spec's cost, gathered per
pool in (deployment, cluster, index) order: the order a fresh plan placed them. A
previous placement may keep more on a pool than it holds (it was written for more nodes,
or by hand): then the replicas that do not fit are not kept, so no plan ever renders more
than fits, and fill places them again where there is room (docs/scheduler.md, "Overdrawn
pools"). The deployment reports `Overdrawn`.
"""

from __future__ import annotations

from .conditions import overdrawn
from .cycle import Cycle
from .ledger import Ledger, Trial, Usage
from .reasons import OVERDRAWN, Reason


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
    return ledger


def _charged(cycle: Cycle) -> Ledger:
    ledger = _empty(cycle)
    per_pool: dict[tuple[str, str], list[Usage]] = {}
    for st in cycle.deployments:
        for (cluster, _), charges in sorted(st.charges.items()):
            for pool, usages in charges:
                per_pool.setdefault((cluster, pool), []).extend(usages)
    ledger.charge_retained(per_pool)
    return ledger


def _drop_overdraw(cycle: Cycle, pools: set[tuple[str, str]]) -> None:
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
            for pool, usages in charges:
                if (cluster, pool) in pools:
                    missing = trial.state((cluster, pool)).try_take(usages)
                    if missing and short is None:
                        short = (missing, pool)
            if short is None:
                trial.commit()
                continue
            rep = kept[ident]
            amount = f"{short[0]} {unit if short[0] != 1 else unit.rstrip('s')}"
            st.drop(rep, Reason(OVERDRAWN, "ledger",
                                f"pool {short[1]} of cluster {cluster} holds less than the previous placement "
                                f"kept there (short by {amount}): not kept, placed again where it fits"))
            st.overdrawn.append(f"{rep.name} ({cluster}#{rep.index}, pool {short[1]}, short by {amount})")
