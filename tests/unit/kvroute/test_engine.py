"""modelplane.kvroute.engine and the simulator's replica: LRU at capacity, prefix hits counted as vLLM
counts them, prefill per uncached token, decode per output token, the batch limit."""

from __future__ import annotations

import math

import pytest

from modelplane.kvroute.engine import EngineProfile, KVCache, hit_tokens
from modelplane.kvroute.sim import build_fleet, simulate
from modelplane.kvroute.trace import TraceRequest

P = EngineProfile(prefill_s_per_token=1e-3, decode_s_per_token=0.01, kv_capacity_blocks=4, block_tokens=10)


def test_lru_evicts_the_least_recently_used_at_capacity() -> None:
    gone: list[int] = []
    cache = KVCache(3, on_evict=gone.append)
    cache.touch([1, 2, 3])
    cache.touch([1])            # 1 is now the most recent
    cache.touch([4])
    assert gone == [2] and list(cache.blocks) == [3, 1, 4] and len(cache) == 3


def test_only_a_prefix_is_reused() -> None:
    cache = KVCache(10)
    cache.touch([0, 1, 2])
    assert cache.prefix([0, 1, 2, 3]) == 3
    assert cache.prefix([0, 9, 2]) == 1          # block 2 is held, but after a miss it cannot be reused
    assert cache.prefix([5, 0, 1]) == 0


def test_a_wholly_cached_prompt_still_computes_its_last_token() -> None:
    assert hit_tokens(3, 30, 10) == 29
    assert hit_tokens(2, 30, 10) == 20
    assert hit_tokens(0, 30, 10) == 0


@pytest.mark.parametrize("field", ["prefill_s_per_token", "decode_s_per_token"])
def test_profile_refuses_nan_and_non_positive(field: str) -> None:
    for bad in (math.nan, math.inf, 0.0, -1.0):
        with pytest.raises(ValueError, match=field):
            EngineProfile(**{field: bad})
    with pytest.raises(ValueError, match="kv_capacity_blocks"):
        EngineProfile(kv_capacity_blocks=0)


def req(i: int, t: float, blocks: tuple[int, ...], out: int = 5) -> TraceRequest:
    return TraceRequest(i, t, len(blocks) * 10, out, blocks)


def test_second_request_with_the_same_prefix_hits_and_starts_sooner() -> None:
    fleet = build_fleet(1, 1, P)
    res = simulate([req(0, 0.0, (0, 1, 2)), req(1, 10.0, (0, 1, 2, 3))], fleet, "wrr")
    # first: 30 uncached tokens x 1 ms + one step; second: 10 uncached (block 3) + one step
    assert res.ttft_s == pytest.approx([0.030 + 0.01, 0.010 + 0.01])
    assert (res.queries, res.hits) == (70, 30)
    rep = fleet.replicas[0]
    assert (rep.queries, rep.hits, rep.served) == (70, 30, 2)


def test_prefills_queue_one_at_a_time() -> None:
    res = simulate([req(0, 0.0, (0, 1)), req(1, 0.0, (5, 6))], build_fleet(1, 1, P), "wrr")
    assert res.ttft_s == pytest.approx([0.03, 0.06])      # the second waits for the first's prefill


def test_batch_limit_holds_a_request_until_a_seat_is_free() -> None:
    one_seat = EngineProfile(prefill_s_per_token=1e-3, decode_s_per_token=0.01, kv_capacity_blocks=4,
                             block_tokens=10, max_num_seqs=1)
    res = simulate([req(0, 0.0, (0, 1), out=10), req(1, 0.0, (5, 6))], build_fleet(1, 1, one_seat), "wrr")
    # the first prefills (30 ms) and decodes 10 tokens (100 ms) before the second may start
    assert res.ttft_s == pytest.approx([0.03, 0.13 + 0.03])


def test_eviction_at_capacity_loses_the_hit() -> None:
    trace = [req(0, 0.0, (0, 1)), req(1, 1.0, (2, 3, 4)), req(2, 2.0, (0, 1))]
    res = simulate(trace, build_fleet(1, 1, P), "wrr")
    assert res.hits == 0          # capacity 4: blocks 0 and 1 were evicted by 2, 3, 4


def test_throughput_and_percentiles() -> None:
    res = simulate([req(0, 0.0, (0,), out=100)], build_fleet(1, 1, P), "wrr")
    assert res.throughput == pytest.approx(100 / (0.02 + 1.0))
    assert res.percentile(50) == res.percentile(99) == pytest.approx(0.02)
