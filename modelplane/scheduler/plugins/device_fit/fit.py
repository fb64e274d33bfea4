"""Device fit: placing one replica's engines on one cluster's pools (semantics §2.5),
re-resolving a kept one (§2.7), and growing the pools for one that fits nowhere (the
feasibility stage's scale-up); the device-fit plugin (this package's `DeviceFit`) runs it.
Three parts:

* `EngineOptions` — everything that does not depend on capacity (which pools can host
  the engine, which fabric groups it may span), computed once per (engine, pool
  signature of a cluster) and shared by every deployment of that shape.
* `place_replica` — the capacity half, run against the ledger or a copy-on-write trial.
* `grow_engine` — the fewest nodes to add so that one engine places (feasibility).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from modelplane.scheduler.growth import ScaleUp
from modelplane.scheduler.ledger import ChargeKey, Ledger, Trial, Usage
from modelplane.scheduler.matching import Matcher, MemberMatch, NoMatch
from modelplane.scheduler.placement_types import EnginePlacement, ResolvedRequest
from modelplane.scheduler.reasons import CAPACITY, INSUFFICIENT_CAPACITY, NEVER, NO_POOL_FITS, PINS_CHANGED, Reason
from modelplane.scheduler.shape import ClusterView, DeploymentShape, EngineShape, MemberShape, PoolView

from .alignment import aligned

PLUGIN = "device-fit"


def short_reason(engine: str, short: int, unit: str, pool: str) -> Reason:
    unit = unit if short != 1 else unit.rstrip("s")
    return Reason(INSUFFICIENT_CAPACITY, PLUGIN, f"engine {engine}: short by {short} {unit} in pool {pool}", CAPACITY)


def no_pool_reason(engine: str, details: list[str]) -> Reason:
    if not details:
        return Reason(NO_POOL_FITS, PLUGIN, f"no pool for engine {engine}: the cluster publishes no pools", NEVER)
    return Reason(NO_POOL_FITS, PLUGIN, f"no pool for engine {engine}: " + "; ".join(details), NEVER)


def _pins_changed(message: str) -> Reason:
    return Reason(PINS_CHANGED, PLUGIN, message)


def member_usage(member: MemberShape, match: MemberMatch) -> list[Usage]:
    # Claimless members (no request, or Synthetic matches only) cost nothing.
    return [(member.pod_count, match.per_pod)] if match.claims else []


@dataclass
class EngineOptions:
    engine: EngineShape
    # (pool, usages) for every pool that can host the whole engine, published order
    hosts: list[tuple[PoolView, list[Usage]]] = field(default_factory=list)
    # pools sharing one non-empty fabric domain (>= 2 pools), in order of first appearance
    groups: list[list[PoolView]] = field(default_factory=list)
    matches: dict[str, tuple[MemberMatch | NoMatch, ...]] = field(default_factory=dict)
    claimable: tuple[bool, ...] = ()
    error: Reason | None = None     # no member can claim anything: never placeable here
    # member pools -> the (immutable) placement: every replica placed alike shares one
    placed: dict[tuple[str, ...], EnginePlacement] = field(default_factory=dict)
    details: list[str] = field(default_factory=list)   # why each non-host pool fails

    def member_fits_pool(self, mi: int, pool: PoolView) -> MemberMatch | None:
        match = self.matches[pool.name][mi]
        if isinstance(match, NoMatch):
            return None
        # A member able to claim a DRA device somewhere must not be stranded claimless.
        if self.claimable[mi] and not match.claims:
            return None
        return match


def engine_options(matcher: Matcher, engine: EngineShape, cluster: ClusterView) -> EngineOptions:
    opts = EngineOptions(engine)
    for pool in cluster.pools:
        opts.matches[pool.name] = tuple(aligned(matcher.match(m, pool.cls), pool.cls) for m in engine.members)
    opts.claimable = tuple(
        any(isinstance(match := ms[mi], MemberMatch) and match.claims for ms in opts.matches.values())
        for mi in range(len(engine.members))
    )
    details = opts.details
    for pool in cluster.pools:
        why = None
        usages: list[Usage] = []
        for mi, member in enumerate(engine.members):
            match = opts.matches[pool.name][mi]
            if isinstance(match, NoMatch):
                why = f"member {mi} ({member.role}) {match}"
                break
            if opts.claimable[mi] and not match.claims:
                why = (f"member {mi} ({member.role}) resolves only Synthetic devices here "
                       f"but claims a DRA device elsewhere")
                break
            usages += member_usage(member, match)
        if why is None and not any(opts.claimable):
            why = "only Synthetic devices match: nothing to claim"
        if why is None:
            opts.hosts.append((pool, usages))
        else:
            details.append(f"pool {pool.name}: {why}")
    if not any(opts.claimable):
        opts.error = no_pool_reason(engine.name, details)
        return opts
    by_domain: dict[str, list[PoolView]] = {}
    for pool in cluster.pools:
        if pool.domain:
            by_domain.setdefault(pool.domain, []).append(pool)
    opts.groups = [g for g in by_domain.values() if len(g) > 1]
    return opts


def demand_key(options: list[EngineOptions]) -> tuple[object, ...]:
    """Everything about a replica's engines that decides whether a cluster's pools can
    take it (what each pool would be charged, which pools may be spanned), nothing that
    names the deployment: replicas of deployments with one shape share it."""
    key: list[object] = []
    for opts in options:
        spans = tuple(tuple((p.name, *(tuple(member_usage(m, match)) if (match := opts.member_fits_pool(mi, p))
                                       else None for mi, m in enumerate(opts.engine.members))) for p in group)
                      for group in opts.groups)
        key.append((opts.error, tuple((pool.name, tuple(usages)) for pool, usages in opts.hosts), spans))
    return tuple(key)


def _requests(opts: EngineOptions, member_pools: tuple[str, ...]) -> tuple[tuple[ResolvedRequest, ...], ...]:
    """What each member resolved on its pool: recorded in the placement for the renderers."""
    out = []
    for mi, pool in enumerate(member_pools):
        match = opts.matches[pool][mi]
        out.append(match.resolved if isinstance(match, MemberMatch) else ())
    return tuple(out)


def _span(opts: EngineOptions, cluster: str, trial: Trial | Ledger,
          group: list[PoolView]) -> tuple[tuple[str, ...] | None, tuple[int, str] | None]:
    """Each member independently on the first pool of the fabric group that matches it
    and has room. Returns (member pools, None) or (None, smallest shortage seen)."""
    sub = Trial(trial)
    pools = []
    shortest = None
    for mi, member in enumerate(opts.engine.members):
        for pool in group:
            match = opts.member_fits_pool(mi, pool)
            if match is None:
                continue
            short = sub.state((cluster, pool.name)).try_take(member_usage(member, match))
            if short == 0:
                pools.append(pool.name)
                break
            if shortest is None or short < shortest[0]:
                shortest = (short, pool.name)
        else:
            return None, shortest
    sub.commit()
    return tuple(pools), None


def _placement(opts: EngineOptions, member_pools: tuple[str, ...]) -> EnginePlacement:
    hit = opts.placed.get(member_pools)
    if hit is None:
        hit = opts.placed[member_pools] = EnginePlacement(_engine_pool(opts, member_pools), member_pools,
                                                          _requests(opts, member_pools))
    return hit


def _engine_pool(opts: EngineOptions, member_pools: tuple[str, ...]) -> str:
    for mi, pool in enumerate(member_pools):
        if opts.claimable[mi]:
            return pool
    return member_pools[0]


def place_engine(opts: EngineOptions, cluster: str, trial: Trial | Ledger, unit: str
                 ) -> tuple[EnginePlacement | None, Reason | None]:
    if opts.error:
        return None, opts.error
    engine = opts.engine
    shortest: tuple[int, str] | None = None
    for pool, usages in opts.hosts:
        short = trial.state((cluster, pool.name)).try_take(usages)
        if short == 0:
            return _placement(opts, (pool.name,) * len(engine.members)), None
        if shortest is None or short < shortest[0]:
            shortest = (short, pool.name)
    for group in opts.groups:
        member_pools, span_short = _span(opts, cluster, trial, group)
        if member_pools is not None:
            return _placement(opts, member_pools), None
        if span_short is not None and (shortest is None or span_short[0] < shortest[0]):
            shortest = span_short
    if shortest is not None:
        return None, short_reason(engine.name, shortest[0], unit, shortest[1])
    return None, no_pool_reason(engine.name, opts.details)


def place_replica(options: list[EngineOptions], cluster: str, ledger: Ledger | Trial
                  ) -> tuple[dict[str, EnginePlacement] | None, Reason | None]:
    """All engines of one replica on one cluster, or nothing: engines share one trial so
    they never double-book a pool, and a failure discards the trial."""
    unit = "nodes" if ledger.accounting == "Node" else "devices"
    if len(options) == 1:
        # One engine: each pool attempt is atomic already, no trial copy needed.
        placed, reason = place_engine(options[0], cluster, ledger, unit)
        return ({options[0].engine.name: placed} if placed else None), reason
    trial = Trial(ledger)
    engines = {}
    for opts in options:
        placed, reason = place_engine(opts, cluster, trial, unit)
        if placed is None:
            return None, reason
        engines[opts.engine.name] = placed
    trial.commit()
    return engines, None


def resolve_retained(matcher: Matcher, shape: DeploymentShape, cluster: ClusterView,
                     engines: dict[str, EnginePlacement]
                     ) -> tuple[dict[str, EnginePlacement] | None, list[tuple[ChargeKey, list[Usage]]], Reason | None]:
    """Re-check an existing replica's pins against the current spec (capacity is not
    checked). Returns (engines, [(pool, usages)], None) or (None, [], reason to move)."""
    if sorted(engines) != sorted(e.name for e in shape.engines):
        return None, [], _pins_changed("engines changed")
    resolved = {}
    charges: list[tuple[ChargeKey, list[Usage]]] = []
    for engine in shape.engines:
        placed = engines[engine.name]
        pools = placed.pools_for(len(engine.members))
        if len(pools) != len(engine.members):
            return None, [], _pins_changed(f"engine {engine.name}: members changed")
        claims = False
        first_claiming = None
        requests = []
        for member, pool_name in zip(engine.members, pools, strict=True):
            pool = cluster.pool(pool_name)
            if pool is None:
                return None, [], _pins_changed(f"engine {engine.name}: pool {pool_name} is gone")
            match = aligned(matcher.match(member, pool.cls), pool.cls)
            if isinstance(match, NoMatch):
                return None, [], _pins_changed(f"engine {engine.name}: member {member.index} "
                                               f"({member.role}) no longer matches pool {pool_name}: {match}")
            if match.claims:
                claims = True
                first_claiming = first_claiming or pool_name
            requests.append(match.resolved)
            charges.append((pool_name, member_usage(member, match)))
        if not claims:
            return None, [], _pins_changed(f"engine {engine.name}: no member resolves a DRA device")
        if len(set(pools)) > 1:
            domains = {cluster.pool(p).domain for p in pools}  # type: ignore[union-attr]
            if len(domains) != 1 or None in domains:
                return None, [], _pins_changed(f"engine {engine.name}: its pools no longer share a fabric domain")
        resolved[engine.name] = EnginePlacement(first_claiming or pools[0], tuple(pools), tuple(requests))
    return resolved, charges, None


def never_fits(options: list[EngineOptions]) -> Reason | None:
    """Why no pool of the cluster can ever host some engine, at any size."""
    for opts in options:
        if opts.error:
            return opts.error
        if not opts.hosts and not opts.groups:
            return no_pool_reason(opts.engine.name, opts.details)
    return None


def grow_engine(opts: EngineOptions, s: ScaleUp, unit: str) -> EnginePlacement | None:
    """Add the fewest nodes that let the engine place on `s.ledger`: one host pool, or for an
    engine that only fits across a fabric group, each member's first matching pool; None if
    no growth lets it."""
    cluster, trial, grown = s.cluster, s.ledger, s.growth
    options: list[tuple[int, dict[str, int]]] = []
    for pool, usages in opts.hosts:
        n = s.nodes_to_add(trial.state((cluster.name, pool.name)), usages, pool)
        options.append((n, {pool.name: n}))
    for group in opts.groups:
        need: dict[str, int] = {}
        for mi, member in enumerate(opts.engine.members):
            fit = next(((p, m) for p in group if (m := opts.member_fits_pool(mi, p)) is not None), None)
            if fit is None:
                break
            n = s.nodes_to_add(trial.state((cluster.name, fit[0].name)), member_usage(member, fit[1]), fit[0])
            need[fit[0].name] = need.get(fit[0].name, 0) + n
        else:
            options.append((sum(need.values()), need))
    for _, need in sorted(options, key=lambda o: o[0]):
        for extra in range(0, 1 + sum(m.pod_count for m in opts.engine.members)):
            sub = Trial(trial)
            for pool_name, n in need.items():
                grown.add(sub, pool_name, n + extra, commit=False)
            placed, _ = place_engine(opts, cluster.name, sub, unit)
            if placed is not None:
                sub.commit()
                for pool_name, n in need.items():
                    grown.pools[pool_name] = grown.pools.get(pool_name, 0) + n + extra
                return placed
    return None
