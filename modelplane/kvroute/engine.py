"""The engine model the routers are judged on: one replica's KV cache of blocks with LRU eviction at a
declared capacity, prefill time per uncached token, decode time per output token, a batch limit.

Calibration (docs/kv-routing.md says more): Llama-3-8B-Instruct on one H100-80GB-SXM under vLLM,
from Lambda's published benchmark run (LambdaLabsML/vllm-benchmark, commit 211b2ae,
results/prompt_10/1xH100-80GB-SXM/Meta-Llama-3-8B-Instruct_tp1_len8192.json, vLLM 2024-09-08):
  * 10 prompts, 1,369 input tokens together, all answered their first token at median TTFT 62.1 ms:
    at most 62.1 ms / 1,369 = 45 us of prefill per token (an upper bound: the fixed cost is in it);
  * median TPOT 7.50 ms: decode time per output token (the first token costs one such step too);
  * the KV cache: Llama-3-8B keeps 2 (K,V) x 32 layers x 8 KV heads x 128 dims x 2 bytes = 128 KiB a
    token, 64 MiB a 512-token block; ~54 GiB of an H100 is left at gpu_memory_utilization 0.9 after
    16 GB of weights and activations: ~860 blocks. The benchmark declares a smaller capacity so
    that shared prefixes fill most of it (benchmarks/kv_routing.py).
  * vLLM's default max_num_seqs is 256 (the batch limit).

How a replica serves (a model, not vLLM's scheduler): requests wait in arrival order; one prefill
runs at a time (a request's prefill starts when the previous one ends and the running batch has a
free seat), costing `prefill_s_per_token` per token not found in the cache plus one decode step;
its first token is out when the prefill ends; it then decodes `output_tokens` steps and leaves the
batch. The cache is looked up and filled when the prefill starts, as vLLM's scheduler allocates
blocks; hits and queries are counted in tokens as vLLM's `vllm:prefix_cache_hits` /
`vllm:prefix_cache_queries` count them (vllm/v1/core/kv_cache_manager.py; a prompt wholly cached
still computes its last token)."""

from __future__ import annotations

from dataclasses import dataclass

# The cache, the hit rule and the constants live in the mock engine, which runs alone in a pod and
# can import nothing of ours: the live engine and the simulator share one model (docs/kv-routing.md).
from modelplane.runtime.mock_engine import (
    BLOCK_TOKENS,
    DECODE_S_PER_TOKEN,
    KV_CAPACITY_BLOCKS,
    PREFILL_S_PER_TOKEN,
    KVCache,
    hit_tokens,
)


@dataclass(frozen=True)
class EngineProfile:
    prefill_s_per_token: float = PREFILL_S_PER_TOKEN     # 62.1 ms / 1,369 tokens (Lambda, 1xH100, Llama-3-8B)
    decode_s_per_token: float = DECODE_S_PER_TOKEN       # median TPOT 7.50 ms (same run)
    kv_capacity_blocks: int = KV_CAPACITY_BLOCKS         # 54 GiB / 64 MiB a block (Llama-3-8B on an H100)
    block_tokens: int = BLOCK_TOKENS
    max_num_seqs: int = 256                # vLLM's default batch limit

    def __post_init__(self) -> None:
        for name in ("prefill_s_per_token", "decode_s_per_token"):
            value = getattr(self, name)
            if not (isinstance(value, float) and 0.0 < value < 10.0):
                raise ValueError(f"engine profile: {name} must be a number of seconds in (0, 10), not {value!r}")
        for name, high in (("kv_capacity_blocks", 10 ** 8), ("block_tokens", 1 << 20), ("max_num_seqs", 1 << 20)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= high:
                raise ValueError(f"engine profile: {name} must be an integer in 1..{high}, not {value!r}")

    def prefill_seconds(self, uncached_tokens: int) -> float:
        """A prefill's time: its uncached tokens and the step that yields the first token."""
        return uncached_tokens * self.prefill_s_per_token + self.decode_s_per_token


__all__ = ["EngineProfile", "KVCache", "hit_tokens"]
