"""The mock engine as a real process under load: with `--concurrency 1` and a 300 ms
answer, three requests at once run one at a time, /metrics counts one running and two
waiting while they do, and their times to first token grow with the wait; read through
the autoscaler's own parser and engine table."""

from __future__ import annotations

import threading
import time

import httpx
import pytest

from modelplane.api.replica_autoscaler import ReplicaAutoscaler
from modelplane.autoscale.engines import VLLM, PodMetrics, ReplicaMetrics, replica_readings
from modelplane.autoscale.exposition import collect, parse
from modelplane.runtime.process import Engine
from tests.manifests import metric, replica_autoscaler

pytestmark = pytest.mark.integration


@pytest.fixture
def engine(tmp_path):
    e = Engine("r-load", tmp_path, deployment="chat", extra=["--concurrency", "1", "--delay-ms", "300"])
    e.wait_ready()
    yield e
    e.stop()


def scrape(url: str) -> PodMetrics:
    with httpx.Client(timeout=5) as client, client.stream("GET", f"{url}/metrics") as response:
        assert response.status_code == 200
        return PodMetrics(parse(collect(response.iter_bytes(), deadline=time.monotonic() + 5)))


def test_requests_queue_beyond_the_limit_and_metrics_say_so(engine) -> None:
    scaler = ReplicaAutoscaler.model_validate(replica_autoscaler(
        "a", "chat", 4, metric("QueueDepth", 1), metric("RequestsRunning", 1), metric("KVCacheUtilization", 0.5),
        metric("TimeToFirstToken", 0.2, percentile=90)))
    codes: list[int] = []

    def ask() -> None:
        codes.append(httpx.post(f"{engine.url}/v1/chat/completions", json={}, timeout=10).status_code)
    threads = [threading.Thread(target=ask) for _ in range(3)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 60         # a liveness bound: the three requests reach the engine
    while True:
        readings = replica_readings(scaler, VLLM, [ReplicaMetrics(True, [scrape(engine.url)])], time.time())
        if readings["QueueDepth"].total == 2 or time.monotonic() > deadline:
            break
        time.sleep(0.02)
    assert (readings["QueueDepth"].total, readings["RequestsRunning"].total,
            readings["KVCacheUtilization"].total) == (2.0, 1.0, 1.0)
    for t in threads:
        t.join(10)
    assert codes == [200, 200, 200]
    after = replica_readings(scaler, VLLM, [ReplicaMetrics(True, [scrape(engine.url)])], time.time())
    assert (after["QueueDepth"].total, after["RequestsRunning"].total) == (0.0, 0.0)
    # One at a time, 300 ms each: the first tokens come no sooner than 0.3, 0.6 and 0.9 s, so
    # p90 (rank 2.7 of 3) is past 0.75 s although every answer takes 0.3 s (no upper bound:
    # a loaded machine only makes the waits longer).
    assert after["TimeToFirstToken"].total >= 0.75
