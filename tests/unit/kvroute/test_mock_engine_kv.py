"""The mock engine's KV-cache model (modelplane.runtime.mock_engine, the one home of the model kvroute's
simulator runs): what a request body may ask of it, the series it adds to /metrics with vLLM's
names, and a short replay through the live engine process counting exactly what the simulator counts.

vLLM's names, checked against docs.vllm.ai/en/stable/design/metrics (V1: `vllm:prefix_cache_queries`
and `vllm:prefix_cache_hits` counters, in tokens; `vllm:kv_cache_usage_perc`, the fraction of used
blocks) and llm-d's model-server metrics reference (the counters scraped as `..._total`);
`vllm:gpu_cache_usage_perc` is V0's name of the usage gauge."""

from __future__ import annotations

import json
import math
from pathlib import Path

import httpx
import pytest

from modelplane.autoscale.exposition import parse
from modelplane.kvroute.engine import EngineProfile
from modelplane.kvroute.sim import build_fleet, simulate
from modelplane.kvroute.trace import TraceRequest
from modelplane.runtime import mock_engine
from modelplane.runtime.process import Engine
from tests.unit.kvroute.traces import conversations


@pytest.mark.parametrize(("body", "says"), [
    ({"kv_block_hashes": [0, 1.5], "prompt_tokens": 10}, "kv_block_hashes"),
    ({"kv_block_hashes": [True], "prompt_tokens": 10}, "kv_block_hashes"),
    ({"kv_block_hashes": [-1], "prompt_tokens": 10}, "kv_block_hashes"),
    ({"kv_block_hashes": list(range(mock_engine.MAX_KV_BLOCKS_PER_REQUEST + 1)), "prompt_tokens": 10},
     "kv_block_hashes"),
    ({"kv_block_hashes": "0,1", "prompt_tokens": 10}, "kv_block_hashes"),
    ({"kv_block_hashes": [0], "prompt_tokens": math.nan}, "prompt_tokens"),
    ({"kv_block_hashes": [0]}, "prompt_tokens"),
    ({"kv_block_hashes": [0], "prompt_tokens": 10 ** 30}, "prompt_tokens"),
    ({"kv_block_hashes": [0], "prompt_tokens": 10, "max_tokens": -3}, "max_tokens"),
    ({"kv_block_hashes": [0], "prompt_tokens": 10, "max_tokens": math.inf}, "max_tokens"),
])
def test_malformed_kv_requests_are_refused_naming_the_field(body: dict[str, object], says: str) -> None:
    reason = mock_engine.kv_request(json.loads(json.dumps(body)))
    assert isinstance(reason, str) and reason.startswith(says)


def test_a_request_without_block_ids_bypasses_the_model() -> None:
    assert mock_engine.kv_request({"messages": []}) is None
    assert mock_engine.kv_request({"kv_block_hashes": [0, 1], "prompt_tokens": 600, "max_tokens": 4}) == (
        [0, 1], 600, 4)


def test_metrics_carry_vllms_prefix_cache_counters_and_usage() -> None:
    queue = mock_engine.RequestQueue(None)
    queue.kv = mock_engine.KVModel(4)
    assert queue.kv.start([0, 1], 1000) == pytest.approx(1000 * mock_engine.PREFILL_S_PER_TOKEN
                                                          + mock_engine.DECODE_S_PER_TOKEN)
    queue.kv.start([0, 1, 2], 1500)            # 1,024 tokens of it cached
    exposition = parse(queue.exposition("chat").encode())
    values = {name: (f.type, f.samples[0].name, f.samples[0].value) for name, f in exposition.families.items()}
    # the project's parser names a counter's family without _total, as OpenMetrics does
    assert values[mock_engine.METRIC_PREFIX_QUERIES] == ("counter", "vllm:prefix_cache_queries_total", 2500.0)
    assert values[mock_engine.METRIC_PREFIX_HITS] == ("counter", "vllm:prefix_cache_hits_total", 1024.0)
    assert values[mock_engine.METRIC_KV_CACHE][2] == values[mock_engine.METRIC_GPU_CACHE][2] == 1.0  # 5 of 4 held
    queue.kv.finish([0, 1])
    assert queue.kv_cache_usage() == 0.75


def test_without_the_model_metrics_are_unchanged() -> None:
    text = mock_engine.RequestQueue(2).exposition("chat")
    assert "prefix_cache" not in text and mock_engine.METRIC_GPU_CACHE not in text


def body(r: TraceRequest) -> dict[str, object]:
    return {"messages": [{"role": "user", "content": "hi"}], "kv_block_hashes": list(r.blocks),
            "prompt_tokens": r.input_tokens, "max_tokens": r.output_tokens}


@pytest.mark.integration
def test_live_engine_counts_what_the_simulator_counts(tmp_path: Path) -> None:
    """A short replay, one request at a time, through the real engine process (its /metrics read back)
    and through the simulator's one replica: the same queries and hits, token for token. Counts only:
    the engine's waits are scaled to 0 (timing on a busy box is no test)."""
    trace = [TraceRequest(i, float(i), r.input_tokens, 3, r.blocks)
             for i, r in enumerate(conversations(120, conversations=12, blocks_per_turn=2))]
    engine = Engine("kv0", tmp_path, deployment="chat", extra=["--kv-blocks", "40", "--kv-time-scale", "0"])
    try:
        engine.wait_ready()
        with httpx.Client(timeout=10) as client:
            for r in trace:
                answer = client.post(f"{engine.url}/v1/chat/completions", json=body(r))
                assert answer.status_code == 200, answer.text
            bad = client.post(f"{engine.url}/v1/chat/completions",
                              content=b'{"kv_block_hashes": [0], "prompt_tokens": NaN}')
            assert bad.status_code == 400 and "prompt_tokens" in bad.text
            metrics = parse(client.get(f"{engine.url}/metrics").content)
    finally:
        engine.stop()
    queries, hits = (metrics.families[n].samples[0].value
                     for n in (mock_engine.METRIC_PREFIX_QUERIES, mock_engine.METRIC_PREFIX_HITS))
    res = simulate(trace, build_fleet(1, 1, EngineProfile(kv_capacity_blocks=40)), "wrr")
    assert 0 < res.hits < res.queries        # the replay both hits and evicts
    assert (queries, hits) == (res.queries, res.hits)
