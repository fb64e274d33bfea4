"""modelplane.kvroute.routers over the simulator: the canary split stays exact, a lost or 429ing cluster
spills with nothing failed, a known prefix sticks to where it is cached, and the baselines behave as
their names say."""

from __future__ import annotations

from collections import Counter

import pytest

from modelplane.kvroute.engine import EngineProfile
from modelplane.kvroute.routers import ROUTERS, CacheAware, rendezvous
from modelplane.kvroute.sim import Fault, build_fleet, run, simulate
from modelplane.kvroute.trace import TraceRequest
from tests.unit.kvroute.traces import conversations

PROFILE = EngineProfile(kv_capacity_blocks=200)


@pytest.mark.parametrize("weights", [(0.9, 0.1), (0.3, 0.3, 0.3, 0.1)])
def test_canary_split_is_exact_over_10000_requests(weights: tuple[float, ...]) -> None:
    trace = conversations(10_000, conversations=2000, rate_per_s=5.0)
    res = run(trace, clusters=len(weights), replicas=2, router="cache-aware",
              profile=EngineProfile(kv_capacity_blocks=3000), weights=weights)
    shares = res.shares()
    canary = shares.get(f"c{len(weights) - 1}", 0.0)
    assert res.failed == 0 and abs(canary - 0.10) <= 0.01, shares
    assert res.decisions["known"] > 1000          # the split held while conversations stuck to their caches


def test_rendezvous_moves_only_the_keys_of_a_removed_cluster() -> None:
    fleet = build_fleet(4, 1, PROFILE)
    before = {k: rendezvous(k, fleet.clusters, lambda c: c.weight) for k in range(2000)}
    rest = [c for c in fleet.clusters if c.name != "c2"]
    after = {k: rendezvous(k, rest, lambda c: c.weight) for k in range(2000)}
    moved = [k for k in before if before[k] is not after[k]]
    assert moved and all(before[k] is fleet.by_name["c2"] for k in moved)


def test_a_known_prefix_sticks_to_the_replica_that_holds_it() -> None:
    first = TraceRequest(0, 0.0, 4 * 512, 10, (0, 11, 12, 13))
    others = [TraceRequest(i, 0.01 * i, 4 * 512, 10, (0, 100 + 3 * i, 101 + 3 * i, 102 + 3 * i))
              for i in range(1, 20)]
    again = TraceRequest(20, 3.0, 6 * 512, 10, (0, 11, 12, 13, 14, 15))
    res = simulate([first, *others, again], build_fleet(4, 4, PROFILE), "cache-aware")
    assert res.placements[20] == res.placements[0]
    assert res.hits >= 4 * 512 - 1


@pytest.mark.parametrize("status", [503, 429])
def test_a_cluster_refusing_mid_replay_spills_with_nothing_failed(status: int) -> None:
    trace = conversations(3000, conversations=800, rate_per_s=20.0)
    start, end = trace[1000].arrival_s, trace[2000].arrival_s
    res = run(trace, clusters=4, replicas=2, router="cache-aware", profile=PROFILE,
              faults=[Fault("c1", start, end, status)])
    assert res.failed == 0 and res.retried >= 1
    during = [p for r, p in zip(trace, res.placements, strict=True) if start <= r.arrival_s < end]
    assert during and all(p is not None and p[0] != "c1" for p in during)
    after = Counter(p[0] for r, p in zip(trace, res.placements, strict=True) if p and r.arrival_s >= end + 11)
    assert after["c1"] > 0            # it is taken back once it answers again


def test_every_cluster_refusing_fails_the_request() -> None:
    trace = conversations(50, conversations=10)
    faults = [Fault(f"c{i}", 0.0, 1e9) for i in range(2)]
    res = run(trace, clusters=2, replicas=1, router="cache-aware", profile=PROFILE, faults=faults)
    assert res.failed == 50


def test_every_router_serves_every_request_and_the_cache_aware_ones_hit_more() -> None:
    trace = conversations(2000, conversations=300, rate_per_s=10.0)
    results = {name: run(trace, clusters=2, replicas=2, router=name, profile=PROFILE) for name in ROUTERS}
    assert all(r.failed == 0 and len(r.ttft_s) == 2000 for r in results.values())
    for smart in ("oracle", "cache-aware"):
        assert results[smart].hit_rate > 1.5 * results["wrr"].hit_rate
        assert results[smart].hit_rate > results["prefix-hash"].hit_rate
    assert results["cache-aware"].hit_rate >= 0.9 * results["oracle"].hit_rate


def test_wrr_follows_the_weights_exactly() -> None:
    trace = conversations(1000, conversations=100)
    res = run(trace, clusters=2, replicas=1, router="wrr", profile=PROFILE, weights=(3.0, 1.0))
    assert res.shares() == {"c0": 0.75, "c1": 0.25}


def test_summaries_are_what_the_router_reads() -> None:
    fleet = build_fleet(2, 2, PROFILE)
    router = CacheAware()
    simulate(conversations(500, conversations=50), fleet, router)
    assert fleet.summaries_published > 0 and fleet.summaries_refused == 0
    assert set(fleet.summaries) == {"c0", "c1"}
