"""A tiny OpenAI-compatible engine that says which replica served the request.

Standard library only, so it runs as the entrypoint of a plain `python` image on the
Kind stack as well as a local process in tests:

    python -m modelplane.runtime.mock_engine --name R --port P [--fail-health-after N | --exit-after N]

`"stream": true` in the body answers with server-sent events.

Load: `--concurrency N` lets N inference requests run at once; the others wait in a queue,
so their time to first token grows with the wait (a request's first token comes after its
wait plus `--delay-ms`). GET /metrics answers in the Prometheus text format with vLLM's
own series (`vllm:num_requests_waiting`, `vllm:num_requests_running`,
`vllm:kv_cache_usage_perc`: running / N, `vllm:time_to_first_token_seconds`), labels
`model_name` and `engine`, as vllm/v1/metrics/loggers.py writes them.

`--stream-interval-ms MS` spaces a stream's chunks (a long generation). SIGTERM stops
accepting (the listening socket closes at once, so new connections are refused) and lets
the requests in flight finish, streams included, for at most `--shutdown-grace-s`
seconds (default 30, Kubernetes' default terminationGracePeriodSeconds), then exits: what
a replica taken out of the routes needs to lose nothing.

Disaggregated prefill (`--pd-role prefill|decode`): speaks vLLM NixlConnector's side of a P/D
proxy (vllm-project/vllm tests/v1/kv_connector/nixl_integration/toy_proxy_server.py,
vllm-project/router): a prefill engine answers a request carrying `kv_transfer_params:
{do_remote_decode: true}` with `kv_transfer_params` naming its blocks (`do_remote_prefill: true`,
`remote_engine_id`: its name); both record each request's `max_tokens` and `kv_transfer_params`
(GET /debug/pd), so a test can see which engine played which phase.

Fault injection: `--fail-health-after N` makes /health answer 503 once N inference
requests were served (inference keeps working, as an engine that is draining would);
`--exit-after N` exits the process right after the Nth. SIGUSR1 / SIGUSR2 switch /health
to failing / healthy at any time. `--api-key-env VAR` makes /v1/* require
`Authorization: Bearer $VAR` or `x-api-key: $VAR` (a stand-in for a SaaS provider); the
key is read from the environment so it never shows in a process listing.
"""
from __future__ import annotations

import argparse
import hmac
import json
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import FrameType
from typing import Any

INFERENCE_PATHS = ("/v1/chat/completions", "/v1/completions", "/v1/messages")
MAX_RECORDED = 100_000
MAX_REQUEST_BYTES = 1 << 20     # a request body (a chat prompt); a larger one is refused unread
READ_TIMEOUT_S = 30.0           # a connection that sends nothing for this long is closed

# vLLM's series (vllm/v1/metrics/loggers.py); tests/unit/autoscale/test_mock_engine_metrics.py
# keeps them equal to modelplane.autoscale.engines' vLLM table (this file imports nothing of ours).
METRIC_WAITING = "vllm:num_requests_waiting"
METRIC_RUNNING = "vllm:num_requests_running"
METRIC_KV_CACHE = "vllm:kv_cache_usage_perc"
METRIC_TTFT = "vllm:time_to_first_token_seconds"
TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
                20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)


class RequestQueue:
    """At most `concurrency` requests run at once (None: no limit); the rest wait for a slot (a
    semaphore: not strictly in arrival order). Counts what vLLM's scheduler gauges count, and
    each request's time to first token."""

    def __init__(self, concurrency: int | None, clock: Callable[[], float] = time.monotonic) -> None:
        self.concurrency = concurrency
        self.clock = clock
        self.waiting = 0
        self.running = 0
        self.buckets = [0] * len(TTFT_BUCKETS)
        self.observed = 0
        self.total_ttft = 0.0
        self._slots = threading.Semaphore(concurrency) if concurrency else None
        self._lock = threading.Lock()

    def enter(self) -> float:
        """Wait for a slot; returns when the request arrived (the clock's time)."""
        arrived = self.clock()
        with self._lock:
            self.waiting += 1
        if self._slots is not None:
            self._slots.acquire()
        with self._lock:
            self.waiting -= 1
            self.running += 1
        return arrived

    def first_token(self, arrived: float) -> None:
        ttft = max(self.clock() - arrived, 0.0)
        with self._lock:
            self.observed += 1
            self.total_ttft += ttft
            for i, bound in enumerate(TTFT_BUCKETS):
                if ttft <= bound:
                    self.buckets[i] += 1

    def leave(self) -> None:
        with self._lock:
            self.running -= 1
        if self._slots is not None:
            self._slots.release()

    def kv_cache_usage(self) -> float:
        return min(self.running / self.concurrency, 1.0) if self.concurrency else 0.0

    def exposition(self, model: str) -> str:
        """The Prometheus text format, as prometheus_client writes vLLM's metrics."""
        labels = f'engine="0",model_name="{_label_value(model)}"'
        with self._lock:
            waiting, running, kv = self.waiting, self.running, self.kv_cache_usage()
            buckets, observed, total = list(self.buckets), self.observed, self.total_ttft
        lines = [
            f"# HELP {METRIC_RUNNING} Number of requests in model execution batches.",
            f"# TYPE {METRIC_RUNNING} gauge", f"{METRIC_RUNNING}{{{labels}}} {float(running)}",
            f"# HELP {METRIC_WAITING} Number of requests waiting to be processed.",
            f"# TYPE {METRIC_WAITING} gauge", f"{METRIC_WAITING}{{{labels}}} {float(waiting)}",
            f"# HELP {METRIC_KV_CACHE} KV-cache usage. 1 means 100 percent usage.",
            f"# TYPE {METRIC_KV_CACHE} gauge", f"{METRIC_KV_CACHE}{{{labels}}} {kv!r}",
            f"# HELP {METRIC_TTFT} Histogram of time to first token in seconds.",
            f"# TYPE {METRIC_TTFT} histogram",
        ]
        lines += [f'{METRIC_TTFT}_bucket{{{labels},le="{bound!r}"}} {float(n)}'
                  for bound, n in zip(TTFT_BUCKETS, buckets, strict=True)]
        lines += [f'{METRIC_TTFT}_bucket{{{labels},le="+Inf"}} {float(observed)}',
                  f"{METRIC_TTFT}_count{{{labels}}} {float(observed)}", f"{METRIC_TTFT}_sum{{{labels}}} {total!r}"]
        return "\n".join(lines) + "\n"


def _label_value(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


class EngineState:
    def __init__(self, name: str, deployment: str | None, fail_health_after: int | None, exit_after: int | None,
                 api_key: str | None, delay: float, concurrency: int | None = None,
                 stream_interval: float = 0.0) -> None:
        self.queue = RequestQueue(concurrency)
        self.stream_interval = stream_interval
        # Inference requests between their headers being read and their answer written.
        self.in_flight = 0
        self.name = name
        self.deployment = deployment
        self.fail_health_after = fail_health_after
        self.exit_after = exit_after
        self.api_key = api_key
        self.delay = delay
        self.served = 0
        self.health_forced: bool | None = None
        self.lock = threading.Lock()
        # --record-headers: per inference request, the header names it carried (lowercase)
        # and every value sent as a caller header; GET /debug/headers returns them.
        self.record_headers = False
        self.seen_headers: list[dict[str, Any]] = []
        self.pd_role: str | None = None
        self.pd_seen: list[dict[str, Any]] = []

    def pd_answer(self, req: Any, port: int) -> dict[str, Any]:
        """Record a P/D request; what a prefill engine adds to its answer (module docstring)."""
        if self.pd_role is None or not isinstance(req, dict):
            return {}
        params = req.get("kv_transfer_params")
        with self.lock:
            if len(self.pd_seen) < MAX_RECORDED:
                self.pd_seen.append({"max_tokens": req.get("max_tokens"), "kv_transfer_params": params})
        if self.pd_role != "prefill" or not (isinstance(params, dict) and params.get("do_remote_decode")):
            return {}
        return {"kv_transfer_params": {"do_remote_prefill": True, "do_remote_decode": False,
                                       "remote_engine_id": self.name, "remote_block_ids": [0, 1],
                                       "remote_host": "127.0.0.1", "remote_port": port}}

    def healthy(self) -> bool:
        if self.health_forced is not None:
            return self.health_forced
        return self.fail_health_after is None or self.served < self.fail_health_after


def _body(path: str, name: str, model: str) -> dict[str, Any]:
    text = f"served by {name}"
    now = int(time.time())
    if path == "/v1/messages":
        return {
            "id": f"msg-{name}", "type": "message", "role": "assistant", "model": model,
            "content": [{"type": "text", "text": text}], "stop_reason": "end_turn",
            "usage": {"input_tokens": 1, "output_tokens": 3},
        }
    if path == "/v1/completions":
        return {
            "id": f"cmpl-{name}", "object": "text_completion", "created": now, "model": model,
            "choices": [{"index": 0, "text": text, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 3, "total_tokens": 4},
        }
    return {
        "id": f"chatcmpl-{name}", "object": "chat.completion", "created": now, "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                     "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 3, "total_tokens": 4},
    }


def _events(path: str, name: str, model: str) -> Iterator[str]:
    words = f"served by {name}".split(" ")
    if path == "/v1/messages":
        start = {"type": "message_start",
                 "message": {"id": f"msg-{name}", "model": model, "role": "assistant", "content": []}}
        yield f"event: message_start\ndata: {json.dumps(start)}\n\n"
        for i, w in enumerate(words):
            delta = {"type": "content_block_delta", "index": 0,
                     "delta": {"type": "text_delta", "text": w if i == 0 else " " + w}}
            yield f"event: content_block_delta\ndata: {json.dumps(delta)}\n\n"
        yield f"event: message_stop\ndata: {json.dumps({'type': 'message_stop'})}\n\n"
        return
    chat = path == "/v1/chat/completions"
    for i, w in enumerate(words):
        text = w if i == 0 else " " + w
        choice = {"index": 0, "delta": {"content": text}} if chat else {"index": 0, "text": text}
        obj = "chat.completion.chunk" if chat else "text_completion"
        yield f"data: {json.dumps({'id': f'cmpl-{name}', 'object': obj, 'model': model, 'choices': [choice]})}\n\n"
    yield "data: [DONE]\n\n"


def make_handler(state: EngineState) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as a real engine behind a proxy
        disable_nagle_algorithm = True  # headers and body go in two writes; avoid 40ms stalls
        timeout = READ_TIMEOUT_S        # a body shorter than its Content-Length holds a thread this long

        def log_message(self, format: str, *args: Any) -> None:
            # Request lines could carry headers' neighbours; stay quiet.
            pass

        def _send(self, code: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("X-Served-By", state.name)
            if state.deployment:
                self.send_header("X-Modelplane-Deployment", state.deployment)
            self.end_headers()
            self.wfile.write(data)

        def _stream(self, path: str, model: str) -> None:
            """Server-sent events, one word per chunk, in the OpenAI or Anthropic shape."""
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.send_header("X-Served-By", state.name)
            if state.deployment:
                self.send_header("X-Modelplane-Deployment", state.deployment)
            self.end_headers()
            for i, event in enumerate(_events(path, state.name, model)):
                if i and state.stream_interval:
                    time.sleep(state.stream_interval)
                data = event.encode()
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")

        def _authorized(self) -> bool:
            if state.api_key is None:
                return True
            bearer = self.headers.get("Authorization", "")
            given = bearer[7:] if bearer.startswith("Bearer ") else self.headers.get("x-api-key", "")
            return hmac.compare_digest(given.encode(), state.api_key.encode())

        def _record(self) -> None:
            if not state.record_headers:
                return
            names = sorted({k.lower() for k in self.headers})
            callers = [v for k, v in self.headers.items() if k.lower().replace("_", "-") == "x-modelplane-caller"]
            with state.lock:
                if len(state.seen_headers) < MAX_RECORDED:
                    state.seen_headers.append({"names": names, "callers": callers})

        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            if path == "/debug/headers" and state.record_headers:
                with state.lock:
                    return self._send(200, {"requests": list(state.seen_headers)})
            if path == "/debug/pd" and state.pd_role is not None:
                with state.lock:
                    return self._send(200, {"role": state.pd_role, "requests": list(state.pd_seen)})
            if path == "/health":
                ok = state.healthy()
                return self._send(200 if ok else 503, {"status": "ok" if ok else "unhealthy"})
            if path == "/metrics":
                data = state.queue.exposition(state.deployment or state.name).encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                return None
            if path == "/v1/models":
                if not self._authorized():
                    return self._send(401, {"error": {"message": "invalid api key"}})
                model = state.deployment or state.name
                return self._send(200, {"object": "list", "data": [
                    {"id": model, "object": "model", "owned_by": "modelplane", "root": state.name}]})
            self._send(404, {"error": {"message": f"no route {path}"}})

        def do_POST(self) -> None:
            path = self.path.split("?", 1)[0]
            declared = (self.headers.get("Content-Length") or "0").strip()
            if not declared.isdigit():
                self.close_connection = True
                return self._send(400, {"error": {"message": "Content-Length is not a whole number"}})
            length = int(declared)
            if length > MAX_REQUEST_BYTES:
                # Never read: a client's Content-Length is no reason to hold gigabytes.
                self.close_connection = True
                return self._send(413, {"error": {"message": f"the body is larger than {MAX_REQUEST_BYTES} bytes"}})
            raw = self.rfile.read(length) if length else b""
            if path not in INFERENCE_PATHS:
                return self._send(404, {"error": {"message": f"no route {path}"}})
            self._record()
            if not self._authorized():
                return self._send(401, {"error": {"message": "invalid api key"}})
            try:
                req = json.loads(raw) if raw else {}
                model, stream = str(req.get("model") or state.name), bool(req.get("stream"))
            except (ValueError, AttributeError):
                return self._send(400, {"error": {"message": "body is not a JSON object"}})
            extra = state.pd_answer(req, self.connection.getsockname()[1])
            with state.lock:
                state.in_flight += 1
            try:
                self._infer(path, model, stream=stream, extra=extra)
            finally:
                with state.lock:
                    state.in_flight -= 1

        def _infer(self, path: str, model: str, *, stream: bool, extra: dict[str, Any] | None = None) -> None:
            arrived = state.queue.enter()   # waits while --concurrency requests run
            try:
                if state.delay:
                    time.sleep(state.delay)
                state.queue.first_token(arrived)
                with state.lock:
                    state.served += 1
                    last = state.exit_after is not None and state.served >= state.exit_after
                if stream:
                    self._stream(path, model)
                else:
                    self._send(200, {**_body(path, state.name, model), **(extra or {})})
            finally:
                state.queue.leave()
            if last:
                self.wfile.flush()
                os._exit(0)  # abrupt on purpose: a crashed engine does not drain

    return Handler


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m modelplane.runtime.mock_engine", description=__doc__.split("\n")[0])
    served = os.environ.get("MODELPLANE_SERVED_MODEL_NAME", "")  # "<ns>/<deployment>" in a pod
    p.add_argument("--name", default=os.environ.get("MODELPLANE_REPLICA") or os.environ.get("HOSTNAME") or "engine",
                   help="replica name reported in every answer (default: $MODELPLANE_REPLICA, else $HOSTNAME)")
    # modelplane.render.meta.ENGINE_PORT, where pods are probed and routed: this file runs
    # alone in a pod (python -m on the shipped source), so it imports nothing of modelplane;
    # tests/unit/render/test_mock_engine_port.py keeps the two equal.
    p.add_argument("--port", type=int, default=8000)
    # A listening socket inherited from the parent (modelplane.runtime.process): the port
    # was bound before this process started, so nobody else could take it meanwhile.
    p.add_argument("--listen-fd", type=int, default=None, metavar="FD", help=argparse.SUPPRESS)
    # In a pod the gateway reaches the engine over the pod network; anywhere else stay local.
    in_pod = "KUBERNETES_SERVICE_HOST" in os.environ
    p.add_argument("--host", default="0.0.0.0" if in_pod else "127.0.0.1")
    p.add_argument("--deployment", default=served.rpartition("/")[2] or None)
    fault = p.add_mutually_exclusive_group()
    fault.add_argument("--fail-health-after", type=int, default=None, metavar="N")
    fault.add_argument("--exit-after", type=int, default=None, metavar="N")
    p.add_argument("--api-key-env", default=None, metavar="VAR")
    p.add_argument("--delay-ms", type=float, default=0.0)
    p.add_argument("--concurrency", type=int, default=None, metavar="N",
                   help="inference requests that run at once; the rest wait (and /metrics counts them)")
    p.add_argument("--stream-interval-ms", type=float, default=0.0, metavar="MS",
                   help="time between the chunks of a streamed answer")
    p.add_argument("--shutdown-grace-s", type=float, default=30.0, metavar="S",
                   help="on SIGTERM, how long the requests in flight may take to finish (default 30)")
    p.add_argument("--pd-role", choices=("prefill", "decode"), default=None,
                   help="play a disaggregated prefill or decode engine (vLLM NixlConnector's kv_transfer_params)")
    p.add_argument("--record-headers", action="store_true",
                   help="remember which headers each inference request carried (GET /debug/headers)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    key = None
    if a.api_key_env:
        key = os.environ.get(a.api_key_env)
        if not key:
            print(f"environment variable {a.api_key_env} is empty", file=sys.stderr)
            return 2
    if a.concurrency is not None and a.concurrency < 1:
        print("--concurrency must be at least 1", file=sys.stderr)
        return 2
    if not 0 <= a.shutdown_grace_s <= 3600 or not 0 <= a.stream_interval_ms <= 60_000:
        print("--shutdown-grace-s must be 0..3600 and --stream-interval-ms 0..60000", file=sys.stderr)
        return 2
    state = EngineState(a.name, a.deployment, a.fail_health_after, a.exit_after, key, a.delay_ms / 1000,
                        a.concurrency, a.stream_interval_ms / 1000)
    state.record_headers = a.record_headers
    state.pd_role = a.pd_role
    if a.listen_fd is None:
        server = ThreadingHTTPServer((a.host, a.port), make_handler(state))
    else:
        server = ThreadingHTTPServer((a.host, a.port), make_handler(state), bind_and_activate=False)
        server.socket.close()
        server.socket = socket.socket(fileno=a.listen_fd)
        server.server_address = server.socket.getsockname()
    server.daemon_threads = True

    def force(*, healthy: bool) -> Callable[[int, FrameType | None], None]:
        def handler(_signum: int, _frame: FrameType | None) -> None:
            state.health_forced = healthy
        return handler

    def terminate(_signum: int, _frame: FrameType | None) -> None:
        # Refuse new connections now; the serving loop ends; main() then waits for what is in flight.
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGUSR1, force(healthy=False))
    signal.signal(signal.SIGUSR2, force(healthy=True))
    signal.signal(signal.SIGTERM, terminate)
    host, port = server.server_address[:2]
    print(f"mock engine {a.name} listening on {host!s}:{port}", flush=True)
    try:
        server.serve_forever(poll_interval=0.1)
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()     # the listening socket: new connections are refused from here on
    drain(state, a.shutdown_grace_s)
    return 0


def drain(state: EngineState, grace: float, poll: float = 0.02) -> None:
    """Wait until no inference request is in flight, at most `grace` seconds. Connections
    kept alive may still bring a request meanwhile: it is served, and waited for too."""
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        with state.lock:
            if state.in_flight == 0:
                return
        time.sleep(poll)


if __name__ == "__main__":
    sys.exit(main())
