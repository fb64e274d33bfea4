"""The demo's loop (modelplane.runtime.scaling) on its own: the engines are read at once, a
slow or silent engine costs its bound and nothing of the others, and a pass says why the
loop is not yet at rest (`demo --settle` waits on that, not on time)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from modelplane.api.replica_autoscaler import ReplicaAutoscaler
from modelplane.autoscale import conditions as c
from modelplane.autoscale.decision import Decision
from modelplane.autoscale.scaled_placement import ScalingOutcome
from modelplane.runtime.scaling import SCRAPE_TIMEOUT_S, PassReport, read_engines
from tests.manifests import metric, replica_autoscaler

GAUGE = b"# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{model_name=\"m\"} 1.0\n"


class _Engines(BaseHTTPRequestHandler):
    """/health answers at once; /metrics as the server's `behaviour` says."""

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        if self.path == "/health":
            self._answer(200, b"ok")
            return
        self.server.behaviour(self)                     # type: ignore[attr-defined]

    def _answer(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def engines() -> Iterator[ThreadingHTTPServer]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Engines)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def test_every_engine_is_read_at_once(engines: ThreadingHTTPServer) -> None:
    """Each /metrics answers only once all three are being read: one after the other, the
    first would wait out its bound and be read as failed."""
    barrier = threading.Barrier(3, timeout=SCRAPE_TIMEOUT_S * 0.75)

    def together(handler: _Engines) -> None:
        try:
            barrier.wait()
        except threading.BrokenBarrierError:
            handler._answer(503, b"read alone")
            return
        handler._answer(200, GAUGE)

    engines.behaviour = together
    url = f"http://127.0.0.1:{engines.server_address[1]}"
    reads = read_engines({"a": url, "b": url, "c": url})
    assert sorted(reads) == ["a", "b", "c"]
    for ready, pod in reads.values():
        assert ready and pod is not None and pod.error is None, pod


def test_a_silent_engine_costs_its_bound_and_the_others_are_read(engines: ThreadingHTTPServer) -> None:
    gone = threading.Event()

    def silent_for_one(handler: _Engines) -> None:
        if handler.headers.get("Host", "").startswith("localhost"):
            gone.wait(SCRAPE_TIMEOUT_S * 3)                 # never answers within the bound
            return
        handler._answer(200, GAUGE)

    engines.behaviour = silent_for_one
    port = engines.server_address[1]
    started = time.monotonic()
    try:
        reads = read_engines({"quiet": f"http://localhost:{port}", "fine": f"http://127.0.0.1:{port}"})
    finally:
        gone.set()
    took = time.monotonic() - started
    assert reads["fine"][0] and reads["fine"][1] is not None and reads["fine"][1].error is None
    ready, pod = reads["quiet"]
    assert not ready and pod is not None and "could not be read" in (pod.error or "")
    assert took < SCRAPE_TIMEOUT_S * 3                      # its bound, not the engine's silence


def test_no_engine_no_read() -> None:
    assert read_engines({}) == {}


# --- at rest ---------------------------------------------------------------------------------

SCALER = ReplicaAutoscaler.model_validate(
    replica_autoscaler("chat", "chat", 4, metric("RequestsRunning", 1.5), min_replicas=1, namespace="ml-team"))
LIMITED = c.condition(c.SCALING_LIMITED, status=False, reason=c.DESIRED_WITHIN_RANGE, message="")


def _report(current: int, desired: int, recommendation: int | None, reason: str, placed: int | None = None,
            draining: tuple[str, ...] = ()) -> PassReport:
    decision = Decision(current, desired, recommendation, reason, "")
    outcome = ScalingOutcome(SCALER, decision, desired if placed is None else placed, LIMITED)
    return PassReport(0.0, {}, {}, outcomes=(outcome,), draining=draining)


@pytest.mark.parametrize(("report", "said"), [
    pytest.param(_report(1, 1, 1, c.NO_CHANGE), [], id="at-the-count-the-metrics-ask-for"),
    pytest.param(_report(1, 1, 0, c.SCALE_DOWN_STABILIZED), [], id="asked-below-minReplicas-is-at-rest"),
    pytest.param(_report(4, 4, 9, c.TOO_MANY_REPLICAS), [], id="asked-above-maxReplicas-is-at-rest"),
    pytest.param(_report(0, 0, None, c.SCALING_DISABLED), [], id="a-parked-deployment-is-at-rest"),
    pytest.param(_report(2, 2, 1, c.SCALE_DOWN_STABILIZED),
                 ["ml-team/chat: holding at 2 (ScaleDownStabilized); the metrics ask for 1"],
                 id="held-by-the-window"),
    pytest.param(_report(4, 1, 1, c.SCALED_DOWN), ["ml-team/chat: 4 -> 1 replicas (ScaledDown)"],
                 id="a-pass-that-changes-the-count"),
    pytest.param(_report(2, 2, None, c.FAILED_GET_METRICS), ["ml-team/chat: holding at 2 (FailedGetMetrics)"],
                 id="metrics-unreadable"),
    pytest.param(_report(3, 3, 3, c.NO_CHANGE, placed=2), ["ml-team/chat: 2 of 3 replicas placed"],
                 id="placed-short"),
    pytest.param(_report(1, 1, 1, c.NO_CHANGE, draining=("chat-9e6fe",)), ["draining: chat-9e6fe"],
                 id="a-replica-still-draining"),
])
def test_a_pass_says_why_the_loop_is_not_at_rest(report: PassReport, said: list[str]) -> None:
    assert report.unsettled() == said


@pytest.mark.parametrize(("given", "said"), [
    pytest.param("nan", "expected a duration", id="nan"),
    pytest.param("-1", "expected a duration", id="negative"),
    pytest.param("1e400", "expected a duration", id="inf"),
    pytest.param("99999", "at most 3600", id="over-the-bound"),
    pytest.param("abc", "expected a duration", id="not-a-number"),
])
def test_a_bad_settle_is_one_argparse_line_and_nothing_runs(given: str, said: str,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    from modelplane.__main__ import main

    with pytest.raises(SystemExit) as exited:
        main(["demo", "examples/autoscaling-live", "--settle", given])
    err = capsys.readouterr().err
    assert exited.value.code == 2 and said in err and "Traceback" not in err
    assert "demo: error: argument --settle: " in err.strip().splitlines()[-1]
