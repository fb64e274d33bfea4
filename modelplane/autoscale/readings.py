"""What the decision reads: one reading per metric of a deployment, and where readings come from.

A `MetricReading` is HPA's view of one metric over a target's pods, per replica here (a
replica is our unit of scale): the sum over the ready replicas that reported it, how
many did, how many ready replicas did not (HPA's "missing" pods) and how many are not
ready yet (HPA's "not yet ready" pods: starting, loading weights, or not placed). An
`Unreadable` says why a whole metric has no value; it never scales down.

`MetricsSource` is how readings arrive: a metrics file (`FileMetricsSource`: `plan --metrics`,
`reconcile --metrics`) or the engines' own /metrics, read through each cluster's pod proxy or
from a Prometheus (`modelplane.autoscale.scraped.ScrapedMetricsSource`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from modelplane.api.common import check_dns_label, check_dns_subdomain, quoted
from modelplane.api.model_deployment import MAX_REPLICAS
from modelplane.api.replica_autoscaler import METRIC_TYPES, METRIC_UNITS, METRIC_VALUE_MAX, ReplicaAutoscaler
from modelplane.json_files import read_json
from modelplane.json_types import JsonValue
from modelplane.limits import MAX_METRICS_FILE_DEPLOYMENTS
from modelplane.suggest import did_you_mean

Key = tuple[str, str]


@dataclass(frozen=True)
class MetricReading:
    """One metric of one deployment. At zero replicas `total` is what waits for the
    deployment (requests queued for it while nothing serves), and `reporting` is 0."""

    total: float
    reporting: int
    missing: int = 0
    unready: int = 0
    observed_at: float | None = None   # unix seconds; None: read now
    note: str | None = None            # why the first missing replica did not report (never its content)

    def __post_init__(self) -> None:
        if not (isinstance(self.total, (int, float)) and math.isfinite(self.total) and self.total >= 0):
            raise ValueError("a metric reading's total must be a finite number >= 0")
        for name in ("reporting", "missing", "unready"):
            count = getattr(self, name)
            if isinstance(count, bool) or not isinstance(count, int) or not 0 <= count <= MAX_REPLICAS:
                raise ValueError(f"a metric reading's {name} must be a whole number 0..{MAX_REPLICAS}")
        if self.observed_at is not None and not math.isfinite(self.observed_at):
            raise ValueError("a metric reading's observed_at must be finite")

    @property
    def average(self) -> float | None:
        return self.total / self.reporting if self.reporting else None

    @classmethod
    def per_replica(cls, average: float, replicas: int, observed_at: float | None = None) -> MetricReading:
        """`average` on each of `replicas` ready replicas (what a metrics file states); at
        zero replicas the value is the deployment's total."""
        return cls(average * replicas if replicas else average, replicas, observed_at=observed_at)


@dataclass(frozen=True)
class Unreadable:
    """A metric with no value this time, and why (never a secret: no URL, label or body)."""

    reason: str


Reading = MetricReading | Unreadable


class MetricsSource(Protocol):
    """Where an autoscaler's readings come from: a file (`plan --metrics`), the engines'
    /metrics scraped through each cluster's API server, or a Prometheus."""

    def read(self, autoscaler: ReplicaAutoscaler, current: int, now: float) -> Mapping[str, Reading]:
        """Metric type -> reading for every metric of `autoscaler`, whose target runs
        `current` replicas. A metric the source could not read is `Unreadable`."""
        ...


def check_value(type_: str, value: object, where: str) -> float:
    """A metric value as a reading may hold it: a finite number, >= 0, within its type's
    bound. ValueError naming `where` otherwise (the value is a number: safe to quote)."""
    if type_ not in METRIC_TYPES:
        raise ValueError(f"{where}: unknown metric type; use one of {', '.join(METRIC_TYPES)}")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{where}: expected a number ({METRIC_UNITS[type_]})")
    try:
        number = float(value)
    except OverflowError:   # an integer of hundreds of digits
        number = math.inf if value > 0 else -math.inf
    if math.isnan(number) or (isinstance(value, float) and math.isinf(number)):
        raise ValueError(f"{where}: {number!r} is not a finite number")
    if number < 0:
        raise ValueError(f"{where}: {number:g} is negative; a {type_} reading is {METRIC_UNITS[type_]}")
    if number > METRIC_VALUE_MAX[type_]:
        raise ValueError(f"{where}: {number:g} is above {METRIC_VALUE_MAX[type_]:g}; a {type_} reading is "
                         f"{METRIC_UNITS[type_]}")
    return number


@dataclass(frozen=True)
class FileMetricsSource:
    """`plan --metrics FILE`: the average per ready replica of each metric, per deployment,
    as `{(namespace, deployment): {type: value}}` (validated by `read_metrics_file` and
    `check_against`). Every current replica counts as ready; a metric the file does not give
    is unreadable."""

    values: Mapping[Key, Mapping[str, float]]
    path: str = "the metrics file"

    def read(self, autoscaler: ReplicaAutoscaler, current: int, now: float) -> Mapping[str, Reading]:
        given = self.values.get(autoscaler.target_key, {})
        out: dict[str, Reading] = {}
        for metric in autoscaler.spec.metrics:
            if metric.type in given:
                out[metric.type] = MetricReading.per_replica(given[metric.type], current, observed_at=now)
            else:
                ns, name = autoscaler.target_key
                out[metric.type] = Unreadable(f"{self.path} gives no {metric.type} for {ns}/{name}")
        return out

    def check_against(self, autoscalers: Mapping[Key, ReplicaAutoscaler]) -> None:
        """Every entry names an autoscaled deployment and a metric its autoscaler uses:
        anything else would be silently ignored. ValueError with the fix otherwise."""
        by_target = {a.target_key: a for a in autoscalers.values()}
        for key in sorted(self.values):
            scaler = by_target.get(key)
            if scaler is None:
                scaled = [f"{ns}/{n}" for ns, n in sorted(by_target)]
                raise ValueError(f"{self.path}: {key[0]}/{key[1]} has no ReplicaAutoscaler (autoscaled "
                                 f"deployments: {', '.join(scaled) or 'none'})"
                                 f"{did_you_mean(f'{key[0]}/{key[1]}', scaled)}; add one or remove the entry")
            used = [m.type for m in scaler.spec.metrics]
            for type_ in sorted(self.values[key]):
                if type_ not in used:
                    raise ValueError(f"{self.path}: {key[0]}/{key[1]}: ReplicaAutoscaler "
                                     f"{scaler.metadata.namespace}/{scaler.name} does not use {type_} "
                                     f"(it uses {', '.join(used)}); add the metric to it or remove the entry")


METRICS_SHAPE = '{"<namespace>/<deployment>": {"QueueDepth": 4.5, ...}} with a number per metric type'


def metric_values(data: JsonValue, where: str) -> dict[Key, dict[str, float]]:
    """A metrics file's content (`plan --metrics`, `reconcile --metrics`, stack config
    `autoscale.metricsFile`): per deployment, the average per ready replica of each metric
    type, each a finite number within its type's bound (`check_value`)."""
    if not isinstance(data, dict):
        raise ValueError(f"{where} must look like {METRICS_SHAPE}")
    if len(data) > MAX_METRICS_FILE_DEPLOYMENTS:
        raise ValueError(f"{where} names {len(data)} deployments; at most {MAX_METRICS_FILE_DEPLOYMENTS} "
                         "(see modelplane/limits.py)")
    out: dict[Key, dict[str, float]] = {}
    for key, values in data.items():
        namespace, slash, name = key.partition("/")
        try:
            if not slash:
                raise ValueError("it has no '/'")
            check_dns_label(namespace, "namespace")
            check_dns_subdomain(name, "deployment name")
        except ValueError as exc:
            raise ValueError(f"{where}: key {quoted(key)} is not \"<namespace>/<deployment>\" ({exc})") from None
        if not isinstance(values, dict):
            raise ValueError(f"{where}: {key} must map metric types to numbers; expected {METRICS_SHAPE}")
        out[(namespace, name)] = {t: check_value(t, v, f"{where}: {key}.{quoted(t)}") for t, v in values.items()}
    return out


def read_metrics_file(path: str, what: str = "metrics file") -> dict[Key, dict[str, float]]:
    """`{"<namespace>/<deployment>": {"<metric type>": <average per ready replica>}}`, read
    from `path` (bounded: modelplane.json_files)."""
    return metric_values(read_json(path, what), f"{what} {path}")


__all__ = ["METRICS_SHAPE", "FileMetricsSource", "MetricReading", "MetricsSource", "Reading", "Unreadable",
           "check_value", "metric_values", "read_metrics_file"]
