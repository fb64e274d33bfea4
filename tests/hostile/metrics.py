"""Hostile engine /metrics bodies (the Prometheus text format, vLLM's names), each named for
what it attacks: shared by the autoscaling hostile tests and benchmarks/autoscale_hostile.py.

Every body stays within MAX_METRICS_RESPONSE_BYTES and MAX_METRICS_SAMPLES, so it is the
parser and the readings, not the fetch, that meet it. `honest(waiting, running, ttft)` is what a
well-behaved engine answers (a TTFT histogram whose p90 is `ttft` seconds or less)."""

from __future__ import annotations

from modelplane.limits import MAX_METRICS_SAMPLES

WAITING = "vllm:num_requests_waiting"
RUNNING = "vllm:num_requests_running"
TTFT = "vllm:time_to_first_token_seconds"


def _gauges(waiting: float | str, running: float | str) -> str:
    return (f"# TYPE {WAITING} gauge\n{WAITING}{{model_name=\"chat\"}} {waiting}\n"
            f"# TYPE {RUNNING} gauge\n{RUNNING}{{model_name=\"chat\"}} {running}\n")


def _histogram(buckets: list[tuple[str, float]]) -> str:
    lines = [f"# TYPE {TTFT} histogram"]
    lines += [f'{TTFT}_bucket{{le="{le}",model_name="chat"}} {count}' for le, count in buckets]
    total = buckets[-1][1] if buckets else 0
    lines += [f"{TTFT}_sum 1.0", f"{TTFT}_count {total}"]
    return "\n".join(lines) + "\n"


def honest(waiting: float = 3.0, running: float = 2.0, ttft: float = 0.5) -> bytes:
    """Gauges, and ten first tokens all within `ttft` seconds."""
    return (_gauges(waiting, running) + _histogram([(f"{ttft!r}", 10), ("+Inf", 10)])).encode()


def untyped_flood() -> bytes:
    """MAX_METRICS_SAMPLES untyped samples of distinct names: the parser rebuilt a family per line."""
    return (_gauges(3, 2) + "".join(f"x_{i} {i}\n" for i in range(MAX_METRICS_SAMPLES - 2))).encode()


def wanted_flood() -> bytes:
    """The queue gauge, once per label value, as many times as the sample bound allows."""
    return (f"# TYPE {WAITING} gauge\n" + "".join(f'{WAITING}{{x="{i}"}} 0\n' for i in range(MAX_METRICS_SAMPLES))
            ).encode()


# name -> the body; each answers the gauges honestly unless they are what it attacks.
HOSTILE_BODIES: dict[str, bytes] = {
    "ttft-le-minus-one": (_gauges(3, 2) + _histogram([("-1", 10), ("+Inf", 10)])).encode(),
    "ttft-le-minus-inf": (_gauges(3, 2) + _histogram([("-Inf", 10), ("+Inf", 10)])).encode(),
    "ttft-only-minus-inf": (_gauges(3, 2) + _histogram([("-Inf", 10)])).encode(),
    "ttft-overflowing": (_gauges(3, 2) + _histogram([("1e308", 10), ("+Inf", 10)])).encode(),
    "ttft-9e19-seconds": (_gauges(3, 2) + _histogram([("9e19", 10), ("+Inf", 10)])).encode(),
    "ttft-nan-count": (_gauges(3, 2) + _histogram([("0.5", float("nan")), ("+Inf", 10)])).encode(),
    "gauge-nan": _gauges("NaN", 2).encode() + _histogram([("0.5", 10), ("+Inf", 10)]).encode(),
    "gauge-inf": _gauges("+Inf", 2).encode() + _histogram([("0.5", 10), ("+Inf", 10)]).encode(),
    "gauge-negative": _gauges(-5, 2).encode() + _histogram([("0.5", 10), ("+Inf", 10)]).encode(),
    "gauge-huge": _gauges("1e300", 2).encode() + _histogram([("0.5", 10), ("+Inf", 10)]).encode(),
    "gauge-400-digits": _gauges("9" * 400, 2).encode() + _histogram([("0.5", 10), ("+Inf", 10)]).encode(),
    "wrong-type": (f"# TYPE {WAITING} counter\n{WAITING}_total 3\n# TYPE {RUNNING} gauge\n{RUNNING} 2\n").encode(),
    "not-utf8": b"\xff\xfe" + _gauges(3, 2).encode(),
    "garbage": b"{{{{ not the text format\n" * 1000,
    "untyped-flood": untyped_flood(),
    "wanted-flood": wanted_flood(),
    "duplicate-series": (_gauges(3, 2) * 2).encode(),
}

# The hostile API server's modes a pod's /metrics may answer as (tests/hostile/server.py): too
# large, compressed to a bomb, endless, dripping past the deadline, nested JSON, failing, redirecting.
HOSTILE_MODES = ("huge", "gzip-bomb", "endless", "drip", "deep", "failing", "redirect")
