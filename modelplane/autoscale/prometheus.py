"""The engines' series from a Prometheus, when the user names one for a cluster: which
instant queries to ask, and their vectors turned into what a scrape of each pod would have
given, so the rest of the path (engines.replica_readings) is the pod proxy's.

    queries = queries_for(fleet, window="2m")            # asked by modelplane.autoscale.pod_metrics
    reading = with_bodies(cluster_metrics, queries)      # each listed pod's series as exposition text

Per series of the engines the fleet's autoscalers read (engines.ENGINE_METRICS):

* a gauge summed over a replica's engines: `sum by (namespace, pod) (vllm:num_requests_waiting)`;
* one averaged (the KV cache): `avg by (namespace, pod) (...)`;
* a histogram: `sum by (namespace, pod, le) (rate(vllm:time_to_first_token_seconds_bucket[2m]))`:
  the rate over the window is Prometheus's, so the percentile covers that window.

Only the pods the API server lists as serving pods of an autoscaled replica are kept (the
series carry Prometheus Operator's `namespace` and `pod` labels). A value is written back
only as a number this module formats (a NaN stays NaN and is refused downstream as a reason);
no label value Prometheus sent is ever written or quoted but a bucket's `le`, parsed as a number.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from modelplane.api import Fleet
from modelplane.autoscale.pod_metrics import ClusterMetrics, Series

from .engines import ENGINE_METRICS, GAUGE, HISTOGRAM, MEAN, engine_of
from .engines import Series as EngineSeries

DEFAULT_WINDOW = "2m"


@dataclass(frozen=True)
class Query:
    promql: str
    series: EngineSeries


def queries_for(fleet: Fleet, window: str = DEFAULT_WINDOW) -> list[Query]:
    """One query per engine series the fleet's autoscalers use, sorted (so every cluster is
    asked the same)."""
    wanted: dict[str, EngineSeries] = {}
    for scaler in fleet.autoscalers.values():
        table = ENGINE_METRICS[engine_of(fleet.deployments[scaler.target_key])]
        for metric in scaler.spec.metrics:
            wanted[table[metric.type].name] = table[metric.type]
    out = []
    for name, series in sorted(wanted.items()):
        if series.kind == HISTOGRAM:
            promql = f"sum by (namespace, pod, le) (rate({name}_bucket[{window}]))"
        else:
            promql = f"{'avg' if series.combine == MEAN else 'sum'} by (namespace, pod) ({name})"
        out.append(Query(promql, series))
    return out


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def _value(v: float) -> str:
    return "NaN" if math.isnan(v) else ("+Inf" if v == math.inf else "-Inf" if v == -math.inf else repr(v))


def with_bodies(reading: ClusterMetrics, queries: Sequence[Query]) -> ClusterMetrics:
    """Each listed Ready pod with, as its body, the exposition text of its samples in the
    queries' vectors; a pod no query could answer for gets the first query's reason."""
    failed = [v for v in reading.series if isinstance(v, str)]
    lines: dict[tuple[str, str], list[str]] = {}
    for q, vector in zip(queries, reading.series, strict=False):
        if isinstance(vector, str):
            continue
        by_pod: dict[tuple[str, str], list[Series]] = {}
        for s in vector:
            ns, pod = s.label("namespace"), s.label("pod")
            if ns and pod:
                by_pod.setdefault((ns, pod), []).append(s)
        for key, samples in by_pod.items():
            text = _family(q.series, samples)
            if text:
                lines.setdefault(key, []).extend(text)
    pods = []
    for p in reading.pods:
        if not p.ready:
            pods.append(p)
            continue
        body = lines.get((p.replica.namespace, p.pod))
        if body is None and failed and len(failed) == len(queries):
            pods.append(replace(p, error=failed[0]))
        else:
            pods.append(replace(p, body=("\n".join(body or []) + "\n").encode()))
    return replace(reading, pods=tuple(pods))


def _family(series: EngineSeries, samples: list[Series]) -> list[str]:
    if series.kind == GAUGE:
        value = _number(samples[0].value)
        return [] if value is None else [f"# TYPE {series.name} gauge", f"{series.name} {_value(value)}"]
    out = [f"# TYPE {series.name} histogram"]
    buckets = []
    for s in samples:
        le, count = _number(s.label("le") or ""), _number(s.value)
        if le is None or count is None or math.isnan(le):
            continue
        buckets.append((le, count))
    for le, count in sorted(buckets):
        out.append(f'{series.name}_bucket{{le="{_value(le)}"}} {_value(count)}')
    return out if buckets else []


__all__ = ["DEFAULT_WINDOW", "Query", "queries_for", "with_bodies"]
