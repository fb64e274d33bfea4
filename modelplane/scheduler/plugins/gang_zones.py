"""gang-zones: the pods of one gang copy (a Leader + Worker engine's leader and its workers) run in
one zone, so its nodes come from one zone of its pools (NCCL across zones is slow, and a pool's
placement group or compact policy is per zone). A pool whose nodes span zones holds, per zone,
what modelplane.clouds.zones says each zone is sure to hold; the ledger keeps one state per zone
of such a pool (ledger.PoolKey (cluster, pool, zone)), which only gang copies charge.

* bind: deployments with a gang engine, in a fleet with a pool whose nodes span zones.
* keep: a kept gang keeps the zones recorded for its copies while they are still zones of its
  pools; one recorded without them (placed before zones were recorded, or its copies changed)
  gets the best fit among what the other kept gangs leave. Either way it charges those zones,
  and the ledger stage drops kept gangs a zone cannot hold, as it does on an overdrawn pool.
  A gang whose pools share no zone is not kept (NoCommonZone).
* reserve: device fit has just chosen the pools. All copies of an engine go to one zone when one
  holds them, else copy by copy; the zone tried first is the best fit (the least room that holds
  it), or on pools no zone of which is capped (GKE total limits) the least used. The zones are
  recorded in the placement (EnginePlacement.zones); the renderers keep each copy's pods in one
  zone by pod affinity, whichever it is. When no zone holds a copy: ZoneShortfall, naming the
  pool, its zones and what each has free. Nothing to undo on a refusal: the fill reserves on a
  trial of the ledger whenever two hooks may refuse, and discards it.
* refuses_already / explain: like device fit, a cluster whose zones refused a demand refuses it
  for the rest of the pass (fill only charges zones), so deployments alike do not try it again;
  the words are worked out once per (cluster, charges so far, engines), when read.
* scale_up (feasibility): after device fit grew the pools, zones for every copy, adding nodes
  to its pools until one zone holds the next copy. NoCommonZone is a refusal of kind NEVER:
  no size of the cluster answers it; ZoneShortfall one of kind CAPACITY.

Gang zones judge the pools device fit chose (the first with room, in published order): a later
pool of the same cluster whose zones would hold the gang is not tried, in this fill or, once
refused, in a later deployment's with the same demand.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Self

from modelplane.scheduler.cycle import Binding, Cycle, DeploymentState, Keeping, Key, Reservation
from modelplane.scheduler.growth import Growth, ScaleUp, nodes_to_add, per_node_devices
from modelplane.scheduler.ledger import DevicePool, Ledger, NodePool, PoolState, Trial, Usage, fresh_nodes
from modelplane.scheduler.ledger_stage import add_zones
from modelplane.scheduler.matching import Matcher, MemberMatch
from modelplane.scheduler.placement_types import EnginePlacement
from modelplane.scheduler.reasons import (
    CAPACITY,
    NEVER,
    NO_COMMON_ZONE,
    REJECTED,
    ZONE_SHORTFALL,
    Deferred,
    Reason,
    Refusal,
)
from modelplane.scheduler.shape import ClusterView, DeploymentShape, EngineShape

from .device_fit import memo as fit_memo
from .device_fit.fit import place_replica

PLUGIN = "gang-zones"


@dataclass(frozen=True)
class GangDemand:
    """One gang engine of a replica, on the pools device fit chose for its members."""

    engine: str
    copies: int
    zones: tuple[str, ...]                               # zones every pool of it has (its first pool's order)
    charges: tuple[tuple[str, tuple[Usage, ...]], ...]   # per zoned pool: what one copy takes from one zone
    capped: bool                                         # some charged pool caps its zones


def gang_demand(matcher: Matcher, engine: EngineShape, cluster: ClusterView,
                pools: tuple[str, ...]) -> GangDemand | Reason | None:
    """What one copy of `engine` takes from one zone, with its members on `pools`; None when
    the zone needs no choosing (no gang, or every pool in one zone or in none the program
    knows); NoCommonZone when its pools share none."""
    if len(engine.members) < 2:
        return None
    views = []
    for name in pools:
        view = cluster.pool(name)
        assert view is not None, f"engine {engine.name} placed on pool {name}, which {cluster.name} lacks"
        views.append(view)
    if not any(v.zoned for v in views):
        return None
    zones: tuple[str, ...] | None = None
    for v in views:
        if v.zones:
            zones = v.zones if zones is None else tuple(z for z in zones if z in v.zones)
    if not zones:
        listed = "; ".join(f"{v.name}: {', '.join(v.zones)}" for v in {v.name: v for v in views}.values() if v.zones)
        return Reason(NO_COMMON_ZONE, PLUGIN, f"engine {engine.name}: its pools share no zone ({listed}), "
                                              "and the pods of one copy must share one", NEVER)
    per_pool: dict[str, list[Usage]] = {}
    for member, view in zip(engine.members, views, strict=True):
        match = matcher.match(member, view.cls)
        if view.zoned and isinstance(match, MemberMatch) and match.claims:
            per_pool.setdefault(view.name, []).append((member.pods, match.per_pod))
    capped = any(v.zone_nodes is not None for v in views if v.name in per_pool)
    return GangDemand(engine.name, engine.copies, zones, tuple((p, tuple(u)) for p, u in per_pool.items()), capped)


def gang_demands(matcher: Matcher, shape: DeploymentShape, cluster: ClusterView,
                 engines: Mapping[str, EnginePlacement]) -> list[GangDemand] | Reason:
    """Every gang engine of a replica placed as `engines` on `cluster` that needs a zone."""
    out = []
    for engine in shape.engines:
        placed = engines.get(engine.name)
        if placed is None or len(engine.members) < 2:
            continue
        demand = gang_demand(matcher, engine, cluster, placed.pools_for(len(engine.members)))
        if isinstance(demand, Reason):
            return demand
        if demand is not None:
            out.append(demand)
    return out


def _look(ledger: Ledger | Trial, key: tuple[str, ...]) -> PoolState:
    return ledger.peek(key) if isinstance(ledger, Trial) else ledger.state(key)


def _free(state: PoolState) -> int:
    if isinstance(state, NodePool):
        return state.free
    assert isinstance(state, DevicePool)
    return sum(sum(vec) * n for vec, n in state.groups.items())


def _by_fit(ledger: Ledger | Trial, cluster: str, demand: GangDemand) -> list[str]:
    """The zones to try, in order: capped ones least room first (best fit), uncapped ones
    least used first; ties in the pool's zone order."""
    if not demand.charges:
        return list(demand.zones)
    room = {z: sum(_free(_look(ledger, (cluster, p, z))) for p, _ in demand.charges) for z in demand.zones}
    sign = 1 if demand.capped else -1
    return sorted(demand.zones, key=lambda z: sign * room[z])      # stable: ties keep zone order


def _scaled(usages: tuple[Usage, ...], copies: int) -> list[Usage]:
    return [(pods * copies, per_pod) for pods, per_pod in usages]


def _take(ledger: Ledger | Trial, cluster: str, demand: GangDemand, zone: str, copies: int) -> bool:
    """Charge `copies` copies on `zone` of every charged pool, or nothing."""
    if len(demand.charges) == 1:            # one pool: try_take charges all or nothing
        pool, usages = demand.charges[0]
        return ledger.state((cluster, pool, zone)).try_take(_scaled(usages, copies)) == 0
    sub = Trial(ledger)
    for pool, usages in demand.charges:
        if sub.state((cluster, pool, zone)).try_take(_scaled(usages, copies)):
            return False
    sub.commit()
    return True


def assign_zones(ledger: Ledger | Trial, cluster: str, demand: GangDemand) -> tuple[str, ...] | None:
    """A zone per copy, charged on `ledger`: one zone for all copies if one holds them, else
    copy by copy; None (nothing charged) when a copy fits no zone."""
    for zone in _by_fit(ledger, cluster, demand):
        if _take(ledger, cluster, demand, zone, demand.copies):
            return (zone,) * demand.copies
    if demand.copies == 1:
        return None
    trial = Trial(ledger)
    zones: list[str] = []
    for _ in range(demand.copies):
        found = next((z for z in _by_fit(trial, cluster, demand) if _take(trial, cluster, demand, z, 1)), None)
        if found is None:
            return None
        zones.append(found)
    trial.commit()
    return tuple(zones)


def copy_nodes(usages: tuple[Usage, ...], per_node: tuple[int, ...], accounting: str) -> int:
    """The nodes one copy's pods take on one pool: a node per claiming pod (Node accounting),
    or the fresh nodes they pack onto best fit (Device accounting)."""
    if accounting == "Node":
        return sum(pods for pods, _ in usages)
    return fresh_nodes((p for pods, p in usages for _ in range(pods)), per_node)


def shortfall(ledger: Ledger | Trial, cluster: ClusterView, demand: GangDemand, accounting: str) -> Reason:
    """Why no zone takes a copy: the pool, its zones and what each has free."""
    pool_name, usages = _tightest(ledger, cluster.name, demand)
    view = cluster.pool(pool_name)
    assert view is not None
    per_node = tuple(d.count for d in view.cls.devices)
    zone_nodes = view.nodes if view.zone_nodes is None else view.zone_nodes
    nodes = copy_nodes(usages, per_node, accounting)
    what = "a copy" if demand.copies == 1 else f"each of its {demand.copies} copies"
    frees = {z: _free(_look(ledger, (cluster.name, pool_name, z))) for z in view.zones}
    if accounting == "Node":
        need, cap, unit = _count(nodes, "node"), zone_nodes, "node"
    else:
        devices = sum(pods * sum(per_pod) for pods, per_pod in usages)
        need = f"{_count(devices, 'device')} on {_count(nodes, 'node')}"
        cap, unit = zone_nodes * sum(per_node), "device"
    each = ", ".join(f"{z}: {max(0, f)} of {cap}" for z, f in frees.items())
    most = max(0, max(frees.values()))
    return Reason(ZONE_SHORTFALL, PLUGIN, f"engine {demand.engine}: {what} needs {need} in one zone of pool "
                                          f"{pool_name}; its zones have at most {_count(most, unit)} free ({each})",
                  CAPACITY)


def _count(n: int, unit: str) -> str:
    return f"{n} {unit}" if n == 1 else f"{n} {unit}s"


def _tightest(ledger: Ledger | Trial, cluster: str, demand: GangDemand) -> tuple[str, tuple[Usage, ...]]:
    """The charged pool no zone of which holds one copy alone, else the first charged pool."""
    for pool, usages in demand.charges:
        one = GangDemand(demand.engine, 1, demand.zones, ((pool, usages),), demand.capped)
        if not any(_take(Trial(ledger), cluster, one, z, 1) for z in demand.zones):
            return pool, usages
    return demand.charges[0]


KEPT = Key[Ledger]("gang-zones.kept")
DEMANDS = Key[dict[tuple[object, ...], "list[GangDemand] | Reason"]]("gang-zones.demands")
# why a cluster's zones refused an engines' replica, by (cluster, charges so far, engines)
WHY = Key[dict[tuple[str, int, int], Reason]]("gang-zones.why")


class GangZones(Binding):
    name = PLUGIN

    def __init__(self, cycle: Cycle, st: DeploymentState) -> None:
        self.cycle, self.st = cycle, st
        self.fit = fit_memo(cycle)
        self.refuses_key = self.scale_up_key = st.engines_id
        # per pool signature of a cluster: the cycle's clusters whose zones refused this demand
        self._refusing: dict[int, set[str]] = {}
        self._demands = cycle.get(DEMANDS) or cycle.put(DEMANDS, {})
        self._placed: dict[tuple[int, tuple[str, ...]], tuple[EnginePlacement, EnginePlacement]] = {}

    @classmethod
    def bind(cls, cycle: Cycle, st: DeploymentState) -> Self | None:
        if not any(len(e.members) > 1 for e in st.shape.engines) or not _zoned(cycle):
            return None
        return cls(cycle, st)

    def _gangs(self, cluster: ClusterView, engines: Mapping[str, EnginePlacement]) -> list[GangDemand] | Reason:
        """The gangs of a replica placed as `engines`, shared by every deployment of these engines
        and every cluster of the same pools and zones (a GangDemand names no cluster)."""
        key = (self.st.engines_id, cluster.sig_id, _zone_layout(self.cycle, cluster),
               tuple((e, p.member_pools or p.pool) for e, p in engines.items()))
        memo = self._demands
        hit = memo.get(key)
        if hit is None:
            hit = memo[key] = gang_demands(self.cycle.matcher, self.st.shape, cluster, engines)
        return hit

    def _with_zones(self, placed: EnginePlacement, zones: tuple[str, ...]) -> EnginePlacement:
        """`placed` with its copies' zones; one object per (placement, zones), shared."""
        key = (id(placed), zones)
        hit = self._placed.get(key)
        if hit is None:
            hit = self._placed[key] = (placed, replace(placed, zones=zones))   # keeps `placed` (and its id) alive
        return hit[1]

    def keep(self, kept: Keeping) -> Reason | None:
        assert kept.engines is not None, "device-fit resolves a kept replica's engines first"
        demands = self._gangs(kept.cluster, kept.engines)
        if isinstance(demands, Reason):
            return demands
        for demand in demands:
            previous = kept.previous.engines.get(demand.engine)
            zones = previous.zones if previous is not None else ()
            if len(zones) != demand.copies or any(z not in demand.zones for z in zones):
                zones = _kept_assignment(self.cycle, kept.cluster, demand)
            kept.engines[demand.engine] = self._with_zones(kept.engines[demand.engine], zones)
            for zone in zones:
                kept.charges += [((pool, zone), list(usages)) for pool, usages in demand.charges]
        return None

    def _refused(self, cluster: ClusterView) -> set[str]:
        hit = self._refusing.get(cluster.sig_id)
        if hit is None:
            hit = self._refusing[cluster.sig_id] = self.fit.refusing((PLUGIN, self.fit.demand(self.st, cluster)))
        return hit

    def refuses_already(self, cluster: ClusterView) -> bool:
        return cluster.name in self._refused(cluster)

    def reserve(self, r: Reservation) -> Refusal | None:
        assert r.engines is not None, "device-fit places the engines before their zones are chosen"
        refused = self._refused(r.cluster)
        if r.cluster.name in refused:
            return Deferred(lambda: self.explain(r.cluster))
        why = self._zones(r.ledger, r.cluster, r.engines)
        if why is not None:
            refused.add(r.cluster.name)
            memo = self.cycle.get(WHY) or self.cycle.put(WHY, {})
            memo[(r.cluster.name, self.cycle.charged.get(r.cluster.name, 0), self.st.engines_id)] = why
        return why

    def _zones(self, ledger: Ledger | Trial, cluster: ClusterView, engines: dict[str, EnginePlacement]
               ) -> Reason | None:
        """Choose and charge the zones of every gang of a replica placed as `engines`, or why not
        (nothing charged then, when there are two gangs)."""
        demands = self._gangs(cluster, engines)
        if isinstance(demands, Reason):
            return demands
        on: Ledger | Trial = ledger if len(demands) < 2 else Trial(ledger)
        for demand in demands:
            zones = assign_zones(on, cluster.name, demand)
            if zones is None:
                return shortfall(on, cluster, demand, self.cycle.accounting)
            engines[demand.engine] = self._with_zones(engines[demand.engine], zones)
        if isinstance(on, Trial) and on is not ledger:
            on.commit()
        return None

    def explain(self, cluster: ClusterView) -> Reason:
        """Why the cluster's zones refuse one more replica now, once per (cluster, charges so
        far, engines): tried on a throwaway trial, device fit's engines first."""
        cycle = self.cycle
        memo = cycle.get(WHY) or cycle.put(WHY, {})
        key = (cluster.name, cycle.charged.get(cluster.name, 0), self.st.engines_id)
        hit = memo.get(key)
        if hit is None:
            trial = Trial(cycle.ledger)
            engines, why = place_replica(self.fit.options(self.st, cluster), cluster.name, trial)
            if engines is not None:
                why = self._zones(trial, cluster, dict(engines))
            hit = memo[key] = why or Reason(REJECTED, self.name, "rejected", CAPACITY)
        return hit

    def scale_up(self, s: ScaleUp) -> bool:
        """Zones for the gangs of the replica device fit just grew the pools for, growing the
        pools further until one zone holds each copy."""
        assert s.engines is not None, "device-fit places the engines (growing pools) before their zones"
        gangs = gang_demands(self.cycle.matcher, self.st.shape, s.cluster, s.engines)
        if isinstance(gangs, Reason):
            return False
        return all(_zones_after_growth(demand, s.ledger, s.growth) for demand in gangs)


ZONED = Key[bool]("gang-zones.zoned")
LAYOUTS = Key[dict[str, tuple[object, ...]]]("gang-zones.layouts")


def _zone_layout(cycle: Cycle, cluster: ClusterView) -> tuple[object, ...]:
    """What a gang demand depends on besides the pools' signature: their zones, and whether
    each caps them."""
    memo = cycle.get(LAYOUTS) or cycle.put(LAYOUTS, {})
    hit = memo.get(cluster.name)
    if hit is None:
        hit = memo[cluster.name] = tuple((p.zones, p.zone_nodes is None) for p in cluster.pools)
    return hit


def _zoned(cycle: Cycle) -> bool:
    hit = cycle.get(ZONED)
    if hit is None:
        hit = cycle.put(ZONED, any(p.zoned for c in cycle.clusters.values() for p in c.pools))
    return hit


def _kept_assignment(cycle: Cycle, cluster: ClusterView, demand: GangDemand) -> tuple[str, ...]:
    """Zones for a kept gang that has none recorded: the best fit among what the kept gangs
    take (their recorded zones, and the ones given so far), else the roomiest zone, which the
    ledger stage then finds overdrawn."""
    book = cycle.get(KEPT) or cycle.put(KEPT, _kept_book(cycle))
    zones = assign_zones(book, cluster.name, demand)
    if zones is not None:
        return zones
    zone = _by_fit(book, cluster.name, GangDemand(demand.engine, demand.copies, demand.zones, demand.charges,
                                                    capped=False))[0]
    for pool, usages in demand.charges:
        book.state((cluster.name, pool, zone)).force_take(_scaled(usages, demand.copies))
    return (zone,) * demand.copies


def _kept_book(cycle: Cycle) -> Ledger:
    """The zones of every zoned pool, charged with the zones the previous placement records
    for its gangs (so that one without any does not take a zone a recorded one holds)."""
    book = Ledger(cycle.accounting)
    for cluster in cycle.clusters.values():
        add_zones(book, cluster)
    for cluster_name, demand, zones in _recorded(cycle):
        for zone in zones:
            for pool, usages in demand.charges:
                book.state((cluster_name, pool, zone)).force_take(list(usages))
    return book


def _recorded(cycle: Cycle) -> Iterator[tuple[str, GangDemand, tuple[str, ...]]]:
    """(cluster, gang, zones) of every gang copy the previous placement records zones for that
    are still zones of its pools."""
    previous = cycle.previous.by_key() if cycle.previous is not None else {}
    for st in cycle.deployments:
        placed = previous.get(st.key)
        if placed is None or st.shape.invalid:
            continue
        for rep in placed.replicas:
            cluster = cycle.clusters.get(rep.cluster)
            for engine in st.shape.engines:
                e = rep.engines.get(engine.name)
                if cluster is None or e is None or not e.zones:
                    continue
                pools = e.pools_for(len(engine.members))
                if len(pools) != len(engine.members) or any(cluster.pool(p) is None for p in pools):
                    continue
                demand = gang_demand(cycle.matcher, engine, cluster, pools)
                if isinstance(demand, GangDemand) and len(e.zones) == demand.copies and \
                        all(z in demand.zones for z in e.zones):
                    yield cluster.name, demand, e.zones


def _zones_after_growth(demand: GangDemand, trial: Trial, grown: Growth) -> bool:
    """Zones for every copy of a gang, adding nodes to its pools until one zone holds the next
    copy: to get `d` more nodes in a zone of a pool capped at `nodes // zones`, the pool grows
    to `zones * (nodes // zones + d)`. False if growing cannot help."""
    cluster = grown.cluster
    for _ in range(demand.copies + 1):
        if assign_zones(trial, cluster.name, demand) is not None:
            return True
        best: tuple[int, dict[str, int]] | None = None
        for zone in demand.zones:
            adds: dict[str, int] = {}
            for pool_name, usages in demand.charges:
                view = cluster.pool(pool_name)
                assert view is not None
                short = nodes_to_add(trial.peek((cluster.name, pool_name, zone)), list(usages), per_node_devices(view))
                if short:
                    now = grown.nodes(view)
                    zones = len(view.zones)
                    adds[pool_name] = short if view.zone_nodes is None else zones * (now // zones + short) - now
            if adds and (best is None or sum(adds.values()) < best[0]):
                best = (sum(adds.values()), adds)
        if best is None:
            return False
        for pool_name, n in best[1].items():
            grown.add(trial, pool_name, n)
    return False
