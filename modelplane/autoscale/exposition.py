"""The engines' /metrics, read with our bounds: the Prometheus text exposition format parsed
by the reference client (`prometheus_client.parser`, the library vLLM and SGLang write it
with), histograms turned into percentiles as PromQL's `histogram_quantile` does.

Bounds (modelplane/limits.py): the response's bytes, each line's length and the number
of samples, checked before or while parsing, so an endless or huge response costs at
most the bound. Nothing a server sent is ever quoted in an error: a label value may hold
a token, a line may be anything. Errors name the line and what is wrong.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TextIO, cast

from prometheus_client.parser import text_fd_to_metric_families

from modelplane.limits import MAX_METRICS_LINE_CHARS, MAX_METRICS_RESPONSE_BYTES, MAX_METRICS_SAMPLES


class ExpositionError(ValueError):
    """A /metrics response that cannot be read; the message quotes none of it."""


@dataclass(frozen=True)
class Sample:
    name: str
    labels: tuple[tuple[str, str], ...]
    value: float

    def label(self, key: str) -> str | None:
        return next((v for k, v in self.labels if k == key), None)


@dataclass(frozen=True)
class Family:
    name: str
    type: str                       # gauge | counter | histogram | summary | unknown ...
    samples: tuple[Sample, ...]


@dataclass(frozen=True)
class Exposition:
    families: dict[str, Family] = field(default_factory=dict)

    def family(self, name: str) -> Family | None:
        return self.families.get(name)


def collect(chunks: Iterable[bytes], limit: int = MAX_METRICS_RESPONSE_BYTES, deadline: float | None = None,
            clock: Callable[[], float] = time.monotonic) -> bytes:
    """A response body from its chunks (e.g. httpx's `iter_bytes()`), refused as soon as it
    passes `limit` bytes or the monotonic `deadline` (a server dripping an endless body):
    never more than one chunk past the bound is held."""
    parts: list[bytes] = []
    size = 0
    for chunk in chunks:
        size += len(chunk)
        if size > limit:
            raise ExpositionError(f"the /metrics response is larger than {limit} bytes (see modelplane/limits.py)")
        if deadline is not None and clock() > deadline:
            raise ExpositionError("the /metrics response did not end in time")
        parts.append(chunk)
    return b"".join(parts)


class _Lines:
    """The text's lines for the parser, counted (to say where it failed) and bounded."""

    def __init__(self, text: str) -> None:
        self._lines = iter(text.splitlines(keepends=True))
        self.number = 0

    def __iter__(self) -> Iterator[str]:
        return self

    def __next__(self) -> str:
        line = next(self._lines)
        self.number += 1
        if len(line) > MAX_METRICS_LINE_CHARS:
            raise ExpositionError(f"line {self.number} of the /metrics response is longer than "
                                  f"{MAX_METRICS_LINE_CHARS} characters")
        return line


def parse(data: bytes) -> Exposition:
    """The families of a /metrics response; ExpositionError when it is too large, not UTF-8
    or not the text format (the line number only, never its content)."""
    if len(data) > MAX_METRICS_RESPONSE_BYTES:
        raise ExpositionError(f"the /metrics response is larger than {MAX_METRICS_RESPONSE_BYTES} bytes "
                              "(see modelplane/limits.py)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ExpositionError(f"the /metrics response is not UTF-8 (line {line})") from None
    lines = _Lines(text)
    families: dict[str, Family] = {}
    count = 0
    try:
        # text_fd_to_metric_families only iterates the "file" line by line.
        for metric in text_fd_to_metric_families(cast(TextIO, lines)):
            samples = []
            for s in metric.samples:
                count += 1
                if count > MAX_METRICS_SAMPLES:
                    raise ExpositionError(f"the /metrics response has more than {MAX_METRICS_SAMPLES} samples "
                                          "(see modelplane/limits.py)")
                samples.append(Sample(s.name, tuple(sorted(s.labels.items())), _number(s.value)))
            before = families.get(metric.name)
            merged = (*before.samples, *samples) if before is not None else tuple(samples)
            families[metric.name] = Family(metric.name, metric.type if before is None else before.type, merged)
    except ExpositionError:
        raise
    except (ValueError, IndexError, KeyError, TypeError):
        # The parser's own message quotes the line (label values included): never shown.
        raise ExpositionError(f"line {lines.number} of the /metrics response is not the Prometheus text "
                              "format") from None
    return Exposition(families)


def _number(value: float) -> float:
    # The parser keeps integers as int: one of 400 digits does not fit a float.
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def series_value(samples: Iterable[Sample], name: str) -> float:
    """One non-negative finite value per sample; ExpositionError (naming only our metric
    name, which is ours) for NaN, an infinity or a negative value."""
    values = [s.value for s in samples]
    for v in values:
        if not math.isfinite(v):
            raise ExpositionError(f"{name} is {'NaN' if math.isnan(v) else 'infinite'}")
        if v < 0:
            raise ExpositionError(f"{name} is negative")
    return sum(values)


Buckets = tuple[tuple[float, float], ...]   # (upper bound, cumulative count), sorted, +Inf last


def buckets_of(family: Family, name: str) -> Buckets:
    """A histogram's buckets summed over its series (engines, model names), validated:
    `le` bounds parse, +Inf is present, counts are finite, non-negative, cumulative."""
    totals: dict[float, float] = {}
    for s in family.samples:
        if s.name != name + "_bucket":
            continue
        le = s.label("le")
        try:
            bound = float(le) if le is not None else math.nan
        except ValueError:
            bound = math.nan
        if math.isnan(bound):
            raise ExpositionError(f"{name} has a bucket without a numeric le")
        if not math.isfinite(s.value) or s.value < 0:
            raise ExpositionError(f"{name} has a bucket count that is NaN, infinite or negative")
        totals[bound] = totals.get(bound, 0.0) + s.value
    buckets = tuple(sorted(totals.items()))
    if not buckets or not math.isinf(buckets[-1][0]):
        raise ExpositionError(f"{name} has no +Inf bucket")
    if any(later < earlier for (_, earlier), (_, later) in zip(buckets, buckets[1:], strict=False)):
        raise ExpositionError(f"{name} has bucket counts that are not cumulative")
    return buckets


def window(now: Buckets, before: Buckets | None) -> Buckets:
    """The observations since `before` (a previous scrape of the same histogram): what a
    rate over the interval holds. A reset (a count went down: the engine restarted) or
    other bounds mean `now` alone."""
    if before is None or [b for b, _ in before] != [b for b, _ in now]:
        return now
    delta = tuple((b, n - p) for (b, n), (_, p) in zip(now, before, strict=True))
    return now if any(n < 0 for _, n in delta) else delta


def quantile(q: float, buckets: Buckets) -> float | None:
    """PromQL's histogram_quantile over classic buckets (prometheus/prometheus
    promql/quantile.go BucketQuantile): linear within the bucket holding the rank, the
    second-highest bound when it falls in +Inf, 0 as the lowest bucket's lower bound.
    None when there are no observations."""
    if not 0 <= q <= 1:
        raise ValueError("a quantile is between 0 and 1")
    observations = buckets[-1][1] if buckets else 0.0
    if observations == 0:
        return None
    if len(buckets) < 2:
        raise ExpositionError("a histogram with only the +Inf bucket has no percentile")
    rank = q * observations
    b = next(i for i, (_, count) in enumerate(buckets) if count >= rank or i == len(buckets) - 1)
    if b == len(buckets) - 1:
        return buckets[-2][0]
    upper, count = buckets[b]
    if b == 0 and upper <= 0:
        return upper
    lower, below = (buckets[b - 1][0], buckets[b - 1][1]) if b > 0 else (0.0, 0.0)
    in_bucket = count - below
    return upper if in_bucket == 0 else lower + (upper - lower) * ((rank - below) / in_bucket)


__all__ = ["Buckets", "Exposition", "ExpositionError", "Family", "Sample", "buckets_of", "collect", "parse",
           "quantile", "series_value", "window"]
