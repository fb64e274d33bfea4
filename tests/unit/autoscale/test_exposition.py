"""The /metrics reader against hostile responses: huge, endless, slow, long lines, too many
samples, not UTF-8, not the format, NaN / infinite / negative buckets, and a secret in a
label value that no error may print. Percentiles are PromQL's histogram_quantile
(prometheus/prometheus promql/quantile.go BucketQuantile: linear interpolation in the
bucket holding the rank, the second-highest bound when the rank falls in +Inf, a lower
bound of 0 for the lowest bucket)."""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from modelplane.autoscale.exposition import (
    ExpositionError,
    Family,
    Sample,
    buckets_of,
    collect,
    parse,
    quantile,
    series_value,
    window,
)
from modelplane.limits import MAX_METRICS_LINE_CHARS, MAX_METRICS_RESPONSE_BYTES, MAX_METRICS_SAMPLES

SECRET = "hf_SECRETtokenDoNotPrint0123456789"


def error(data: bytes) -> str:
    with pytest.raises(ExpositionError) as exc:
        parse(data)
    return str(exc.value)


def test_reads_families_types_and_labels() -> None:
    exp = parse(b'# HELP vllm:num_requests_waiting w\n# TYPE vllm:num_requests_waiting gauge\n'
                b'vllm:num_requests_waiting{engine="0",model_name="q"} 3.0\n'
                b'vllm:num_requests_waiting{engine="1",model_name="q"} 1.0\nother 2\n')
    family = exp.family("vllm:num_requests_waiting")
    assert family.type == "gauge"
    assert [s.label("engine") for s in family.samples] == ["0", "1"]
    assert exp.family("other").type == "unknown"


def test_a_huge_response_is_refused_before_it_is_parsed() -> None:
    assert "larger than 4194304 bytes" in error(b"a 1\n" * (MAX_METRICS_RESPONSE_BYTES // 4 + 1))


def test_an_endless_response_is_cut_at_the_bound() -> None:
    pulled = 0

    def endless():
        nonlocal pulled
        for chunk in itertools.repeat(b"x" * 65536):
            pulled += 1
            yield chunk
    with pytest.raises(ExpositionError, match="larger than"):
        collect(endless())
    assert pulled == MAX_METRICS_RESPONSE_BYTES // 65536 + 1


def test_a_slow_drip_is_cut_at_the_deadline() -> None:
    ticks = itertools.count()
    with pytest.raises(ExpositionError, match="did not end in time"):
        collect(itertools.repeat(b"a 1\n"), deadline=10, clock=lambda: next(ticks))


def test_collect_joins_a_response_within_the_bounds() -> None:
    assert collect([b"a 1\n", b"b 2\n"], deadline=10, clock=lambda: 0) == b"a 1\nb 2\n"


def test_a_long_line_is_refused_by_number() -> None:
    data = b"a 1\n" + b'x{v="' + b"y" * MAX_METRICS_LINE_CHARS + b'"} 1\n'
    assert error(data) == f"line 2 of the /metrics response is longer than {MAX_METRICS_LINE_CHARS} characters"


def test_too_many_samples_are_refused() -> None:
    data = b"".join(b"m%d 1\n" % i for i in range(MAX_METRICS_SAMPLES + 1))
    assert f"more than {MAX_METRICS_SAMPLES} samples" in error(data)


def test_not_utf8_is_refused_by_line() -> None:
    assert error(b"a 1\nb\xff 2\n") == "the /metrics response is not UTF-8 (line 2)"


@pytest.mark.parametrize("data", [
    f'vllm:num_requests_waiting{{token="{SECRET}",model_name="q",model_name="r"}} 1\n'.encode(),
    f'vllm:num_requests_waiting{{token="{SECRET}" 1\n'.encode(),
    f'# TYPE {SECRET}!! gauge\n'.encode(),
    f'{SECRET}{{a="b"}} one\n'.encode(),
])
def test_a_malformed_line_is_named_by_number_and_never_quoted(data) -> None:
    text = error(b"ok 1\n" + data)
    assert text == "line 2 of the /metrics response is not the Prometheus text format"
    assert SECRET not in text


def test_an_integer_too_large_for_a_float_reads_as_infinite() -> None:
    """The parser keeps integers exact; a value of 400 digits is infinite to us, then refused."""
    family = parse(b"vllm:num_requests_waiting 1" + b"0" * 400 + b"\n").family("vllm:num_requests_waiting")
    assert family.samples[0].value == math.inf
    with pytest.raises(ExpositionError, match="is infinite"):
        series_value(family.samples, "vllm:num_requests_waiting")


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["vllm:x", "{", "}", '"', "=", ",", " ", "\n", "# TYPE ", "# HELP ", "le",
                                 "NaN", "+Inf", "-1", "1e308", "1" + "0" * 400, "\\", SECRET, "gauge",
                                 "histogram", "_bucket"]),
                max_size=40))
def test_no_input_escapes_as_anything_but_an_exposition_error(parts) -> None:
    try:
        parse("".join(parts).encode())
    except ExpositionError as exc:
        assert SECRET not in str(exc)


def histogram(*buckets: tuple[str, float]) -> Family:
    return Family("h", "histogram", tuple(Sample("h_bucket", (("le", le),), count) for le, count in buckets))


@pytest.mark.parametrize("family, words", [
    (histogram(("0.1", 1), ("1", 2)), "h has no +Inf bucket"),
    (histogram(("0.1", 3), ("+Inf", 2)), "h has bucket counts that are not cumulative"),
    (histogram(("x", 1), ("+Inf", 2)), "h has a bucket without a numeric le"),
    (histogram(("NaN", 1), ("+Inf", 2)), "h has a bucket without a numeric le"),
    (histogram(("0.1", math.nan), ("+Inf", 2)), "NaN, infinite or negative"),
    (histogram(("0.1", -1), ("+Inf", 2)), "NaN, infinite or negative"),
    (histogram(("0.1", math.inf), ("+Inf", math.inf)), "NaN, infinite or negative"),
])
def test_bad_histograms_are_a_reason(family, words) -> None:
    with pytest.raises(ExpositionError, match=words.replace("+", r"\+")):
        buckets_of(family, "h")


def test_series_of_one_histogram_are_summed_by_bound() -> None:
    family = Family("h", "histogram", (
        Sample("h_bucket", (("engine", "0"), ("le", "1")), 1), Sample("h_bucket", (("engine", "0"), ("le", "+Inf")), 2),
        Sample("h_bucket", (("engine", "1"), ("le", "1")), 3), Sample("h_bucket", (("engine", "1"), ("le", "+Inf")), 3),
        Sample("h_count", (("engine", "0"),), 2)))
    assert buckets_of(family, "h") == ((1.0, 4.0), (math.inf, 5.0))


@pytest.mark.parametrize("q, buckets, expected", [
    # the worked example of histogram_quantile: le 0.5 holds 24101, le 1 holds 26351 of 27892
    (0.9, ((0.5, 24101), (1.0, 26351), (math.inf, 27892)), 0.5 + 0.5 * (0.9 * 27892 - 24101) / 2250),
    (0.5, ((1.0, 10), (2.0, 20), (math.inf, 20)), 1.0),           # linear in the first bucket from 0
    (0.25, ((1.0, 10), (2.0, 20), (math.inf, 20)), 0.5),
    (0.99, ((1.0, 10), (2.0, 20), (math.inf, 30)), 2.0),          # in +Inf: the second-highest bound
    (0.5, ((-1.0, 10), (math.inf, 20)), -1.0),                    # lowest bucket at or below 0: its bound
    (0.5, ((1.0, 0), (math.inf, 0)), None),                       # no observations
])
def test_quantile_is_promqls(q, buckets, expected) -> None:
    got = quantile(q, buckets)
    assert got == expected if expected is None else got == pytest.approx(expected)


def test_only_an_inf_bucket_has_no_percentile() -> None:
    with pytest.raises(ExpositionError, match="only the \\+Inf bucket"):
        quantile(0.9, ((math.inf, 3.0),))


def test_window_subtracts_the_previous_scrape_and_survives_a_restart() -> None:
    before = ((1.0, 10.0), (math.inf, 12.0))
    now = ((1.0, 11.0), (math.inf, 20.0))
    assert window(now, before) == ((1.0, 1.0), (math.inf, 8.0))
    restarted = ((1.0, 1.0), (math.inf, 2.0))
    assert window(restarted, before) == restarted
    assert window(now, ((2.0, 1.0), (math.inf, 2.0))) == now, "other bounds: no window"
    assert window(now, None) == now
