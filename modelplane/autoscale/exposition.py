"""The engines' /metrics, read with our bounds: the Prometheus text exposition format parsed
by the reference client (`prometheus_client.parser`, the library vLLM and SGLang write it
with), histograms turned into percentiles as PromQL's `histogram_quantile` does.

Bounds (modelplane/limits.py): the response's bytes, each line's length, the number of
samples (in all and per family), and the time to parse, checked before or while parsing, so
an endless or huge response costs at most the bound. Only the families the caller reads are
parsed (the rest of the lines are scanned and skipped), and the parse is linear in the lines.
Nothing a server sent is ever quoted in an error: a label value may hold a token, a line may
be anything. Errors name the line and what is wrong.
"""

from __future__ import annotations

import functools
import math
import re
import time
from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TextIO, cast

from prometheus_client.parser import text_fd_to_metric_families

from modelplane.limits import (
    MAX_METRICS_FAMILY_SAMPLES,
    MAX_METRICS_LINE_CHARS,
    MAX_METRICS_RESPONSE_BYTES,
    MAX_METRICS_SAMPLES,
)


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


# The sample names a family's series may carry besides its own (histograms, summaries, counters).
_SUFFIXES = (b"_bucket", b"_sum", b"_count", b"_created", b"_total")
# Lines of one family past MAX_METRICS_FAMILY_SAMPLES: its TYPE and HELP lines.
_FAMILY_COMMENT_LINES = 8
# How often (in lines) the parse deadline is checked, besides before each response.
_CLOCK_EVERY = 256
_OUT_OF_TIME = ("the /metrics response was not parsed within this pass's time budget (see "
                "MAX_METRICS_PARSE_SECONDS in modelplane/limits.py)")


@functools.cache
def _family_patterns(names: frozenset[str]) -> tuple[re.Pattern[bytes], re.Pattern[bytes]]:
    """(where any of `names` occurs, what a line of one of them is: a TYPE line or a sample)."""
    alternatives = b"|".join(re.escape(n.encode()) for n in sorted(names, key=len, reverse=True))
    suffixes = b"|".join(_SUFFIXES)
    line = re.compile(rb"[ \t]*(?:#[ \t]+TYPE[ \t]+(?:" + alternatives + rb")[ \t].*|(?:" + alternatives
                      + rb")(?:" + suffixes + rb")?(?:[{ \t].*)?)")
    return re.compile(alternatives), line


def select_families(data: bytes | bytearray, names: Collection[str]) -> bytes:
    """Only the lines of `data` that belong to the families `names` (their TYPE lines and their
    samples), in order: what parse reads of them. The text is searched for the names (in C, so
    4 MB cost a few milliseconds whatever its lines hold); ExpositionError when one of them is
    on more lines than a family may have samples (MAX_METRICS_FAMILY_SAMPLES)."""
    finder, line = _family_patterns(frozenset(names))
    kept: list[bytes] = []
    seen: dict[bytes, int] = {}
    after = -1                                   # the end of the last line looked at
    for found in finder.finditer(data):
        if found.start() < after:
            continue                             # a second name on a line already looked at
        name = found.group(0)
        seen[name] = seen.get(name, 0) + 1
        if seen[name] > MAX_METRICS_FAMILY_SAMPLES + _FAMILY_COMMENT_LINES:
            raise ExpositionError(f"{name.decode()} is on more than {MAX_METRICS_FAMILY_SAMPLES} lines of the "
                                  "/metrics response (see MAX_METRICS_FAMILY_SAMPLES in modelplane/limits.py)")
        start = data.rfind(b"\n", 0, found.start()) + 1
        end = data.find(b"\n", found.end())
        after = len(data) if end < 0 else end
        text = bytes(data[start:after])
        if line.fullmatch(text):
            kept.append(text)
    return b"".join(k + b"\n" for k in kept)


class _Lines:
    """The text's lines for the parser, counted (to say where it failed) and bounded; the
    deadline is checked every _CLOCK_EVERY lines."""

    def __init__(self, text: str, deadline: float | None, clock: Callable[[], float]) -> None:
        self._lines = iter(text.splitlines(keepends=True))
        self.number = 0
        self._deadline = deadline
        self._clock = clock

    def __iter__(self) -> Iterator[str]:
        return self

    def __next__(self) -> str:
        line = next(self._lines)
        self.number += 1
        if len(line) > MAX_METRICS_LINE_CHARS:
            raise ExpositionError(f"line {self.number} of the /metrics response is longer than "
                                  f"{MAX_METRICS_LINE_CHARS} characters")
        if self._deadline is not None and self.number % _CLOCK_EVERY == 0 and self._clock() > self._deadline:
            raise ExpositionError(_OUT_OF_TIME)
        return line


def parse(data: bytes | bytearray, names: Collection[str] | None = None, deadline: float | None = None,
          clock: Callable[[], float] = time.monotonic) -> Exposition:
    """The families of a /metrics response (only those in `names`, when given: select_families;
    the lines of every other family are never parsed); ExpositionError when it is too large, not
    UTF-8, not the text format (the line number only, never its content; with `names`, the
    number among their lines), holds one series twice, more than MAX_METRICS_FAMILY_SAMPLES
    samples of one family, or is not parsed by the monotonic `deadline`. Linear in its lines."""
    if len(data) > MAX_METRICS_RESPONSE_BYTES:
        raise ExpositionError(f"the /metrics response is larger than {MAX_METRICS_RESPONSE_BYTES} bytes "
                              "(see modelplane/limits.py)")
    if deadline is not None and clock() > deadline:
        raise ExpositionError(_OUT_OF_TIME)
    if names is not None:
        data = select_families(data, names)
    where = "the /metrics response" if names is None else "the engines' series in the /metrics response"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ExpositionError(f"{where} is not UTF-8 (line {line})") from None
    lines = _Lines(text, deadline, clock)
    samples: dict[str, list[Sample]] = {}
    types: dict[str, str] = {}
    seen: set[tuple[str, tuple[tuple[str, str], ...]]] = set()
    count = 0
    try:
        # text_fd_to_metric_families only iterates the "file" line by line. It yields an untyped
        # family per sample line: the samples are gathered per name, never copied again.
        for metric in text_fd_to_metric_families(cast(TextIO, lines)):
            into = samples.setdefault(metric.name, [])
            types.setdefault(metric.name, metric.type)
            for s in metric.samples:
                count += 1
                if count > MAX_METRICS_SAMPLES:
                    raise ExpositionError(f"the /metrics response has more than {MAX_METRICS_SAMPLES} samples "
                                          "(see modelplane/limits.py)")
                if len(into) >= MAX_METRICS_FAMILY_SAMPLES:
                    raise ExpositionError(f"{_ours(metric.name, names)} has more than {MAX_METRICS_FAMILY_SAMPLES} "
                                          "samples (see modelplane/limits.py)")
                sample = Sample(s.name, tuple(sorted(s.labels.items())), _number(s.value))
                if (sample.name, sample.labels) in seen:
                    # Prometheus keeps one value per series and scrape; two would be summed here.
                    raise ExpositionError(f"{_ours(metric.name, names)} has the same series twice (line "
                                          f"{lines.number} of {where})")
                seen.add((sample.name, sample.labels))
                into.append(sample)
    except ExpositionError:
        raise
    except (ValueError, IndexError, KeyError, TypeError):
        # The parser's own message quotes the line (label values included): never shown.
        raise ExpositionError(f"line {lines.number} of {where} is not the Prometheus text format") from None
    return Exposition({name: Family(name, types[name], tuple(found)) for name, found in samples.items()})


def _ours(name: str, names: Collection[str] | None) -> str:
    """A family's name as a message may say it: only one we asked for (a name is outside text)."""
    return name if names is not None and name in names else "a metric family"


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
    if not buckets or buckets[-1][0] != math.inf:
        raise ExpositionError(f"{name} has no +Inf bucket")
    if buckets[0][0] < 0:
        # A duration is never negative: PromQL would return the bound itself as the percentile.
        raise ExpositionError(f"{name} has a bucket with a negative le")
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
           "quantile", "select_families", "series_value", "window"]
