"""The engines' own Prometheus series for each metric type, and readings built from them.

One table per engine; each name is the engine's, checked against its source by a
contract test (tests/unit/autoscale/test_engine_metrics.py cites the file and version):

* vLLM, vllm/v1/metrics/loggers.py (`PrometheusStatLogger`), labels `model_name`, `engine`;
* SGLang, python/sglang/srt/metrics/collector.py (`SchedulerMetricsCollector`,
  `TokenizerMetricsCollector`).

The mock engine (modelplane/runtime/mock_engine.py) writes the vLLM names, so an engine whose
image and command name neither family is read with those.

`replica_readings` is the pure half of the scraped source: given each replica's
readiness and its engine pods' parsed /metrics, the reading per metric type the
decision takes (fetched through each cluster's pod proxy by modelplane.autoscale.pod_metrics, from a
Prometheus, or from local engines: modelplane.autoscale.scraped).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from modelplane.api import ModelDeployment
from modelplane.api.replica_autoscaler import (
    KV_CACHE_UTILIZATION,
    METRIC_VALUE_MAX,
    QUEUE_DEPTH,
    REQUESTS_RUNNING,
    TIME_TO_FIRST_TOKEN,
    ReplicaAutoscaler,
)
from modelplane.engine_family import engine_family

from .exposition import Buckets, Exposition, ExpositionError, buckets_of, quantile, series_value, window
from .readings import MetricReading, Reading, Unreadable

GAUGE = "gauge"
HISTOGRAM = "histogram"
SUM = "sum"      # over the series of a pod and the pods of a replica (requests)
MEAN = "mean"    # (a fraction of each engine's KV cache)

VLLM = "vllm"
SGLANG = "sglang"
DEFAULT_ENGINE = VLLM


@dataclass(frozen=True)
class Series:
    name: str
    kind: str       # GAUGE | HISTOGRAM
    combine: str    # SUM | MEAN (gauges)


ENGINE_METRICS: Mapping[str, Mapping[str, Series]] = {
    VLLM: {
        QUEUE_DEPTH: Series("vllm:num_requests_waiting", GAUGE, SUM),
        REQUESTS_RUNNING: Series("vllm:num_requests_running", GAUGE, SUM),
        # Renamed from vllm:gpu_cache_usage_perc in vLLM 0.9; 1 means 100 percent.
        KV_CACHE_UTILIZATION: Series("vllm:kv_cache_usage_perc", GAUGE, MEAN),
        TIME_TO_FIRST_TOKEN: Series("vllm:time_to_first_token_seconds", HISTOGRAM, SUM),
    },
    SGLANG: {
        QUEUE_DEPTH: Series("sglang:num_queue_reqs", GAUGE, SUM),
        REQUESTS_RUNNING: Series("sglang:num_running_reqs", GAUGE, SUM),
        # used / max_total_num_tokens of the KV cache token pool: a fraction too.
        KV_CACHE_UTILIZATION: Series("sglang:token_usage", GAUGE, MEAN),
        TIME_TO_FIRST_TOKEN: Series("sglang:time_to_first_token_seconds", HISTOGRAM, SUM),
    },
}


# Every series any engine table reads: the only families a pod's /metrics is parsed for.
SERIES_NAMES = frozenset(s.name for table in ENGINE_METRICS.values() for s in table.values())


@dataclass(frozen=True)
class PodMetrics:
    """One engine pod's /metrics: parsed, or why it could not be (never its content)."""

    exposition: Exposition | None = None
    error: str | None = None


@dataclass(frozen=True)
class ReplicaMetrics:
    """What a scrape found of one replica: ready or not, and its engine pods' metrics.
    `previous` holds each pod's histograms from the scrape before (by pod index), so a
    percentile covers the interval between scrapes, not the engine's whole life."""

    ready: bool
    pods: Sequence[PodMetrics] = ()
    previous: Mapping[int, Mapping[str, Buckets]] = field(default_factory=dict)


def engine_of(deployment: ModelDeployment) -> str:
    """Which table reads a deployment's engines: the family its image or command names
    (the same rule the PD router and the SGLang checks use), else the default."""
    for engine in deployment.engines:
        family = engine_family(engine)
        if family is not None and family in ENGINE_METRICS:
            return family
    return DEFAULT_ENGINE


def replica_value(type_: str, series: Series, replica: ReplicaMetrics, percentile: float | None) -> float:
    """The replica's value of one metric; ExpositionError naming what is wrong."""
    if not replica.pods:
        raise ExpositionError("the replica has no engine pod to read")
    if series.kind == HISTOGRAM:
        merged: dict[float, float] = {}
        for i, pod in enumerate(replica.pods):
            buckets = window(_buckets(pod, series), replica.previous.get(i, {}).get(series.name))
            for bound, count in buckets:
                merged[bound] = merged.get(bound, 0.0) + count
        found = quantile((percentile or 0.0) / 100, tuple(sorted(merged.items())))
        # No first token in the interval: nothing waited for one.
        value = 0.0 if found is None else found
    else:
        values = [_gauge(pod, series) for pod in replica.pods]
        total = sum(values)
        value = total / len(values) if series.combine == MEAN else total
    return _bounded(type_, series, value)


def _bounded(type_: str, series: Series, value: float) -> float:
    """A replica's value as a reading may hold it, whether a gauge or a histogram's percentile
    gave it: finite, >= 0 and within its type's bound (a 9e19 s TTFT would ask for maxReplicas)."""
    if not math.isfinite(value) or value < 0:
        raise ExpositionError(f"{series.name} gives {'NaN' if math.isnan(value) else f'{value:g}'}, not a finite "
                              "number >= 0")
    if value > METRIC_VALUE_MAX[type_]:
        raise ExpositionError(f"{series.name} is {value:g}, above the {METRIC_VALUE_MAX[type_]:g} a {type_} "
                              "reading may hold")
    return value


def _family(pod: PodMetrics, series: Series) -> Exposition:
    if pod.exposition is None:
        raise ExpositionError(pod.error or "an engine pod's /metrics could not be read")
    family = pod.exposition.family(series.name)
    if family is None:
        raise ExpositionError(f"{series.name} is not in an engine pod's /metrics")
    if family.type != series.kind:
        raise ExpositionError(f"{series.name} is a {family.type} there, not a {series.kind}")
    return pod.exposition


def _gauge(pod: PodMetrics, series: Series) -> float:
    family = _family(pod, series).families[series.name]
    samples = [s for s in family.samples if s.name == series.name]
    if not samples:
        raise ExpositionError(f"{series.name} has no sample")
    value = series_value(samples, series.name)
    return value / len(samples) if series.combine == MEAN else value


def _buckets(pod: PodMetrics, series: Series) -> Buckets:
    return buckets_of(_family(pod, series).families[series.name], series.name)


def replica_idle(deployment: ModelDeployment, replica: ReplicaMetrics | None) -> bool | None:
    """Whether nothing runs or waits on any of the replica's engines (its engine's queue and
    batch gauges all 0): a replica out of the routes has drained. None when that cannot be
    known (no metrics, or an engine's could not be read)."""
    if replica is None or not replica.pods:
        return None
    table = ENGINE_METRICS[engine_of(deployment)]
    for pod in replica.pods:
        for type_ in (QUEUE_DEPTH, REQUESTS_RUNNING):
            try:
                if _gauge(pod, table[type_]) != 0:
                    return False
            except ExpositionError:
                return None
    return True


def replica_readings(autoscaler: ReplicaAutoscaler, engine: str, replicas: Sequence[ReplicaMetrics],
                     now: float) -> dict[str, Reading]:
    """HPA's per-pod grouping, per replica: a ready replica whose metric reads is
    reporting, a ready one whose metric does not is missing, one not ready is set aside."""
    table = ENGINE_METRICS.get(engine, ENGINE_METRICS[DEFAULT_ENGINE])
    out: dict[str, Reading] = {}
    if not replicas:
        # What waits for a deployment with no replica is the gateway's to count, not an engine's.
        return {m.type: Unreadable("no replica to read") for m in autoscaler.spec.metrics}
    for metric in autoscaler.spec.metrics:
        series = table[metric.type]
        total, reporting, missing, unready = 0.0, 0, 0, 0
        errors: list[str] = []
        for replica in replicas:
            if not replica.ready:
                unready += 1
                continue
            try:
                total += replica_value(metric.type, series, replica, metric.percentile)
                reporting += 1
            except ExpositionError as exc:
                missing += 1
                errors.append(str(exc))
        if reporting == 0 and missing:
            out[metric.type] = Unreadable(f"no ready replica reported {series.name}: {errors[0]}")
        else:
            out[metric.type] = MetricReading(total, reporting, missing, unready, observed_at=now,
                                             note=errors[0] if errors else None)
    return out


__all__ = ["DEFAULT_ENGINE", "ENGINE_METRICS", "SERIES_NAMES", "SGLANG", "VLLM", "PodMetrics", "ReplicaMetrics",
           "Series", "engine_of", "replica_idle", "replica_readings", "replica_value"]
