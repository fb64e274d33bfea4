"""Contract tests: each metric type reads the engine's own Prometheus series, by the name and
type the engine's source defines, from an exposition written the way the engine writes it
(both engines write /metrics with prometheus_client, as these tests do).

Sources read (with `read_file` / `find_string`):
* vLLM: vllm-project/vllm vllm/v1/metrics/loggers.py, `PrometheusStatLogger.__init__` in the
  0.12 line (the version whose comments say `vllm:time_per_output_token_seconds` is "Deprecated
  in 0.11"), labelnames ["model_name", "engine"]; an earlier stored version
  (commit 005a810bc40faa25b8870fbc8559c3462581eee3) has `vllm:gpu_cache_usage_perc` marked
  "Deprecated in 0.9 - Renamed as vllm:kv_cache_usage_perc", and the 0.12 line no longer
  defines the old name.
* SGLang: sgl-project/sglang python/sglang/srt/metrics/collector.py
  (commit 00ae9c1590d2d0bb6c0bfff39e312c34ae3dd538), `SchedulerMetricsCollector` and
  `TokenizerMetricsCollector`; `token_usage` is `num_used / max_total_num_tokens` in the
  scheduler (scheduler_metrics_mixin / pool_stats `_get_token_info`).
"""

from __future__ import annotations

import re

import pytest
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from modelplane.api import load_manifest_text
from modelplane.api.replica_autoscaler import METRIC_TYPES, ReplicaAutoscaler
from modelplane.autoscale.engines import (
    ENGINE_METRICS,
    SGLANG,
    VLLM,
    PodMetrics,
    ReplicaMetrics,
    engine_of,
    replica_readings,
    replica_value,
)
from modelplane.autoscale.exposition import ExpositionError, parse
from modelplane.autoscale.readings import MetricReading, Unreadable
from tests.manifests import deployment, engine, member, metric, replica_autoscaler, request, to_yaml

VLLM_LABELS = ["model_name", "engine"]
VLLM_TTFT_BUCKETS = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
                     20.0, 40.0, 80.0, 160.0, 640.0, 2560.0]
SGLANG_LABELS = ["model_name", "engine_type", "tp_rank", "pp_rank"]


def written(build) -> PodMetrics:
    registry = CollectorRegistry()
    build(registry)
    return PodMetrics(parse(generate_latest(registry)))


def value(engine: str, type_: str, pod: PodMetrics, percentile: float | None = None) -> float:
    return replica_value(type_, ENGINE_METRICS[engine][type_], ReplicaMetrics(True, [pod]), percentile)


def test_every_engine_table_names_every_metric_type() -> None:
    for table in ENGINE_METRICS.values():
        assert tuple(table) == METRIC_TYPES


# --- vLLM --------------------------------------------------------------------------------

def test_vllm_num_requests_waiting_is_queue_depth() -> None:
    """vllm/v1/metrics/loggers.py: Gauge name="vllm:num_requests_waiting", documentation
    "Number of requests waiting to be processed.", labelnames ["model_name", "engine"];
    one series per engine of the pod, summed."""
    def build(r):
        g = Gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.", VLLM_LABELS,
                  registry=r)
        g.labels("qwen", "0").set(3)
        g.labels("qwen", "1").set(2)
    assert ENGINE_METRICS[VLLM]["QueueDepth"].name == "vllm:num_requests_waiting"
    assert value(VLLM, "QueueDepth", written(build)) == 5


def test_vllm_num_requests_running_is_requests_running() -> None:
    """vllm/v1/metrics/loggers.py: Gauge name="vllm:num_requests_running", documentation
    "Number of requests in model execution batches."."""
    def build(r):
        Gauge("vllm:num_requests_running", "Number of requests in model execution batches.", VLLM_LABELS,
              registry=r).labels("qwen", "0").set(7)
    assert ENGINE_METRICS[VLLM]["RequestsRunning"].name == "vllm:num_requests_running"
    assert value(VLLM, "RequestsRunning", written(build)) == 7


def test_vllm_kv_cache_usage_perc_is_kv_cache_utilization() -> None:
    """vllm/v1/metrics/loggers.py: Gauge name="vllm:kv_cache_usage_perc", documentation
    "KV-cache usage. 1 means 100 percent usage." (renamed from vllm:gpu_cache_usage_perc in
    0.9, which the 0.12 line no longer exports): a fraction, averaged over engines."""
    def build(r):
        g = Gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", VLLM_LABELS, registry=r)
        g.labels("qwen", "0").set(0.5)
        g.labels("qwen", "1").set(0.7)
    assert ENGINE_METRICS[VLLM]["KVCacheUtilization"].name == "vllm:kv_cache_usage_perc"
    assert value(VLLM, "KVCacheUtilization", written(build)) == pytest.approx(0.6)


def test_vllm_deprecated_gpu_cache_usage_perc_is_not_read() -> None:
    """The pre-0.9 name is gone from current vLLM: a pod exporting only it has no KV reading."""
    def build(r):
        Gauge("vllm:gpu_cache_usage_perc", "GPU KV-cache usage.", VLLM_LABELS, registry=r).labels("q", "0").set(0.9)
    with pytest.raises(ExpositionError, match="vllm:kv_cache_usage_perc is not in an engine pod's /metrics"):
        value(VLLM, "KVCacheUtilization", written(build))


def test_vllm_time_to_first_token_seconds_is_time_to_first_token() -> None:
    """vllm/v1/metrics/loggers.py: Histogram name="vllm:time_to_first_token_seconds",
    documentation "Histogram of time to first token in seconds.", buckets 0.001 ... 2560.0;
    p90 by PromQL's histogram_quantile over its buckets."""
    def build(r):
        h = Histogram("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.",
                      VLLM_LABELS, buckets=VLLM_TTFT_BUCKETS, registry=r).labels("qwen", "0")
        for seconds in [0.05] * 8 + [0.3, 0.3]:
            h.observe(seconds)
    assert ENGINE_METRICS[VLLM]["TimeToFirstToken"].name == "vllm:time_to_first_token_seconds"
    # rank 9 of 10: the 0.25..0.5 bucket holds ranks 9-10, so p90 is halfway: 0.375
    assert value(VLLM, "TimeToFirstToken", written(build), percentile=90) == pytest.approx(0.375)
    assert value(VLLM, "TimeToFirstToken", written(build), percentile=50) == pytest.approx(0.04 + 0.02 * 5 / 8)


# --- SGLang ------------------------------------------------------------------------------

def test_sglang_num_queue_reqs_is_queue_depth() -> None:
    """python/sglang/srt/metrics/collector.py SchedulerMetricsCollector: Gauge
    name="sglang:num_queue_reqs", documentation "The number of requests in the waiting queue."."""
    def build(r):
        Gauge("sglang:num_queue_reqs", "The number of requests in the waiting queue.", SGLANG_LABELS,
              registry=r).labels("qwen", "unified", "0", "0").set(4)
    assert ENGINE_METRICS[SGLANG]["QueueDepth"].name == "sglang:num_queue_reqs"
    assert value(SGLANG, "QueueDepth", written(build)) == 4


def test_sglang_num_running_reqs_is_requests_running() -> None:
    """collector.py SchedulerMetricsCollector: Gauge name="sglang:num_running_reqs",
    documentation "The number of running requests."."""
    def build(r):
        Gauge("sglang:num_running_reqs", "The number of running requests.", SGLANG_LABELS,
              registry=r).labels("qwen", "unified", "0", "0").set(9)
    assert ENGINE_METRICS[SGLANG]["RequestsRunning"].name == "sglang:num_running_reqs"
    assert value(SGLANG, "RequestsRunning", written(build)) == 9


def test_sglang_token_usage_is_kv_cache_utilization() -> None:
    """collector.py SchedulerMetricsCollector: Gauge name="sglang:token_usage", documentation
    "The token usage."; the scheduler sets it to num_used / max_total_num_tokens of the KV
    token pool, a fraction like vLLM's."""
    def build(r):
        Gauge("sglang:token_usage", "The token usage.", SGLANG_LABELS,
              registry=r).labels("qwen", "unified", "0", "0").set(0.82)
    assert ENGINE_METRICS[SGLANG]["KVCacheUtilization"].name == "sglang:token_usage"
    assert value(SGLANG, "KVCacheUtilization", written(build)) == pytest.approx(0.82)


def test_sglang_time_to_first_token_seconds_is_time_to_first_token() -> None:
    """collector.py TokenizerMetricsCollector: Histogram
    name="sglang:time_to_first_token_seconds", documentation "Histogram of time to first
    token in seconds."."""
    def build(r):
        h = Histogram("sglang:time_to_first_token_seconds", "Histogram of time to first token in seconds.",
                      SGLANG_LABELS, buckets=[0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4], registry=r)
        for seconds in (0.15, 0.15, 0.15, 0.5):
            h.labels("qwen", "unified", "0", "0").observe(seconds)
    assert ENGINE_METRICS[SGLANG]["TimeToFirstToken"].name == "sglang:time_to_first_token_seconds"
    assert value(SGLANG, "TimeToFirstToken", written(build), percentile=75) == pytest.approx(0.2)


def test_the_engine_family_picks_the_table() -> None:
    sglang = engine("main", member("Standalone", request("gpu", 1), image="lmsysorg/sglang:v0.5.0"))
    vllm = engine("main", member("Standalone", request("gpu", 1), image="vllm/vllm-openai:v0.11.0"))
    mock = engine("main", member("Standalone", request("gpu", 1), image="python:3.12-slim",
                                 command=["python", "-m", "modelplane.runtime.mock_engine"]))
    fleet = load_manifest_text(to_yaml([deployment("s", 1, sglang), deployment("v", 1, vllm),
                                        deployment("m", 1, mock)]))
    assert [engine_of(fleet.deployments[("default", n)]) for n in "smv"] == [SGLANG, VLLM, VLLM]


# --- readings from replicas -----------------------------------------------------------------

def scaler(*metrics) -> ReplicaAutoscaler:
    return ReplicaAutoscaler.model_validate(replica_autoscaler("a", "m", 8, *metrics))


def queue_pod(waiting: float) -> PodMetrics:
    def build(r):
        Gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.", VLLM_LABELS,
              registry=r).labels("qwen", "0").set(waiting)
    return written(build)


def test_replicas_group_as_hpa_groups_pods() -> None:
    replicas = [ReplicaMetrics(True, [queue_pod(3), queue_pod(1)]),        # two engine copies: 4
                ReplicaMetrics(True, [queue_pod(2)]),
                ReplicaMetrics(True, [PodMetrics(error="connection refused")]),   # missing
                ReplicaMetrics(False, [])]                                 # not ready
    readings = replica_readings(scaler(metric("QueueDepth", 4)), VLLM, replicas, now=5.0)
    assert readings == {"QueueDepth": MetricReading(6.0, 2, missing=1, unready=1, observed_at=5.0,
                                                   note="connection refused")}


def test_a_metric_no_ready_replica_reports_is_unreadable_with_the_first_reason() -> None:
    nan = written(lambda r: Gauge("vllm:num_requests_waiting", "w", VLLM_LABELS, registry=r).labels("q", "0")
                  .set(float("nan")))
    readings = replica_readings(scaler(metric("QueueDepth", 4)), VLLM, [ReplicaMetrics(True, [nan])], now=5.0)
    assert readings == {"QueueDepth": Unreadable("no ready replica reported vllm:num_requests_waiting: "
                                                 "vllm:num_requests_waiting is NaN")}


@pytest.mark.parametrize("build, words", [
    (lambda r: Gauge("vllm:num_requests_waiting", "w", VLLM_LABELS, registry=r).labels("q", "0").set(float("inf")),
     "vllm:num_requests_waiting is infinite"),
    (lambda r: Gauge("vllm:num_requests_waiting", "w", VLLM_LABELS, registry=r).labels("q", "0").set(-1),
     "vllm:num_requests_waiting is negative"),
    (lambda r: Counter("vllm:num_requests_waiting", "w", VLLM_LABELS, registry=r).labels("q", "0").inc(),
     "vllm:num_requests_waiting is a counter there, not a gauge"),
    (lambda r: Gauge("vllm:num_requests_waiting", "w", VLLM_LABELS, registry=r).labels("q", "0").set(2e6),
     "vllm:num_requests_waiting is 2e+06, above the 1e+06 a QueueDepth reading may hold"),
    (lambda r: Gauge("vllm:num_requests_waiting", "w", VLLM_LABELS, registry=r), "has no sample"),
])
def test_wrong_values_and_types_are_a_reason(build, words) -> None:
    with pytest.raises(ExpositionError, match=re.escape(words)):
        value(VLLM, "QueueDepth", written(build))


def test_a_histogram_percentile_covers_the_interval_since_the_last_scrape() -> None:
    registry = CollectorRegistry()
    h = Histogram("vllm:time_to_first_token_seconds", "t", VLLM_LABELS, buckets=VLLM_TTFT_BUCKETS,
                  registry=registry).labels("q", "0")
    for _ in range(100):
        h.observe(0.005)                      # an hour of fast first tokens
    before = parse(generate_latest(registry))
    from modelplane.autoscale.exposition import buckets_of

    previous = {0: {"vllm:time_to_first_token_seconds": buckets_of(before.families[
        "vllm:time_to_first_token_seconds"], "vllm:time_to_first_token_seconds")}}
    for _ in range(10):
        h.observe(3.0)                        # then the queue builds
    now = PodMetrics(parse(generate_latest(registry)))
    series = ENGINE_METRICS[VLLM]["TimeToFirstToken"]
    lifetime = replica_value("TimeToFirstToken", series, ReplicaMetrics(True, [now]), 90)
    recent = replica_value("TimeToFirstToken", series, ReplicaMetrics(True, [now], previous), 90)
    assert lifetime < 0.01 and 2.5 < recent <= 5.0
    idle = replica_value("TimeToFirstToken", series, ReplicaMetrics(True, [now], {0: {series.name: buckets_of(
        now.exposition.families[series.name], series.name)}}), 90)
    assert idle == 0.0, "no first token in the interval reads as nothing waiting"
