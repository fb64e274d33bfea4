"""The mock engine's queue model and /metrics: the same series as vLLM (it cannot import
modelplane, so its names are typed out there and held equal to the vLLM table here), a
per-engine concurrency limit beyond which requests wait, and a time to first token that
grows with the wait. No sockets here: tests/integration/test_mock_engine_metrics.py runs
the real process."""

from __future__ import annotations

import threading
import time

import pytest

from modelplane.autoscale.engines import ENGINE_METRICS, VLLM, PodMetrics, ReplicaMetrics, replica_value
from modelplane.autoscale.exposition import parse
from modelplane.runtime import mock_engine
from tests.unit.autoscale.test_engine_metrics import VLLM_TTFT_BUCKETS


def test_the_mock_engine_writes_vllms_names_and_buckets() -> None:
    table = ENGINE_METRICS[VLLM]
    written = (mock_engine.METRIC_WAITING, mock_engine.METRIC_RUNNING, mock_engine.METRIC_KV_CACHE,
               mock_engine.METRIC_TTFT)
    assert written == tuple(table[t].name for t in table)
    assert list(mock_engine.TTFT_BUCKETS) == VLLM_TTFT_BUCKETS


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def wait_for(check, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.001)


def read(queue: mock_engine.RequestQueue, type_: str, percentile: float | None = None) -> float:
    pod = PodMetrics(parse(queue.exposition('ml/chat "v1"\\').encode()))
    return replica_value(type_, ENGINE_METRICS[VLLM][type_], ReplicaMetrics(True, [pod]), percentile)


def test_requests_beyond_the_limit_wait_and_their_first_token_waits_too() -> None:
    clock = Clock()
    queue = mock_engine.RequestQueue(1, clock)
    first = queue.enter()                        # runs at once
    arrived: list[float] = []
    second = threading.Thread(target=lambda: arrived.append(queue.enter()))
    second.start()
    wait_for(lambda: queue.waiting == 1)
    assert (read(queue, "QueueDepth"), read(queue, "RequestsRunning"), read(queue, "KVCacheUtilization")) == \
        (1.0, 1.0, 1.0)
    clock.now = 0.2
    queue.first_token(first)                     # the first request's first token: 0.2 s
    queue.leave()
    second.join(5)
    assert not second.is_alive() and (queue.waiting, queue.running) == (0, 1)
    clock.now = 0.4
    queue.first_token(arrived[0])                # the second waited 0.2 s, then 0.2 s more
    queue.leave()
    assert (queue.observed, queue.total_ttft) == (2, pytest.approx(0.6))
    # p90 of 0.2 s and 0.4 s: rank 1.8 falls in the 0.25..0.5 bucket, 0.8 of its one observation in
    assert read(queue, "TimeToFirstToken", 90) == pytest.approx(0.25 + 0.25 * 0.8)
    assert (read(queue, "QueueDepth"), read(queue, "RequestsRunning"), read(queue, "KVCacheUtilization")) == \
        (0.0, 0.0, 0.0)


def test_without_a_limit_nothing_waits_and_the_kv_cache_reads_empty() -> None:
    queue = mock_engine.RequestQueue(None)
    for _ in range(5):
        queue.enter()
    assert (queue.waiting, queue.running, read(queue, "KVCacheUtilization")) == (0, 5, 0.0)


def test_the_model_label_is_escaped_so_the_exposition_parses() -> None:
    text = mock_engine.RequestQueue(2).exposition('a"b\\c\nd')
    assert 'model_name="a\\"b\\\\c\\nd"' in text
    family = parse(text.encode()).family("vllm:num_requests_running")
    assert family.samples[0].label("model_name") == 'a"b\\c\nd'


def test_concurrency_below_one_is_refused(capsys) -> None:
    assert mock_engine.main(["--concurrency", "0"]) == 2
    assert "--concurrency must be at least 1" in capsys.readouterr().err
