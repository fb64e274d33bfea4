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

KV cache (`--kv-blocks N`): the engine model of modelplane.kvroute (docs/kv-routing.md), its one
home being this file (it runs alone in a pod): a cache of N blocks of `--block-tokens` with LRU
eviction; a request whose body carries `kv_block_hashes` (its prompt's block ids, as a Mooncake
trace gives them) and `prompt_tokens` has its prefix looked up and its blocks filled, waits for the
one prefill running, then spends `--prefill-us-per-token` per uncached token plus one decode step
(its first token), then `max_tokens` decode steps of `--decode-ms-per-token`, all times
`--kv-time-scale` (0: no waiting, the counts only). /metrics then adds vLLM's
`vllm:prefix_cache_queries` / `vllm:prefix_cache_hits` counters (tokens, as vLLM counts them) and
`vllm:gpu_cache_usage_perc` (vLLM V0's name), and `vllm:kv_cache_usage_perc` becomes the blocks of
running requests over N, as vLLM V1 counts used (not merely cached) blocks.

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
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
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
# vLLM V1's prefix-cache counters (vllm/v1/metrics/loggers.py; counted in tokens) and V0's usage gauge.
METRIC_PREFIX_QUERIES = "vllm:prefix_cache_queries"
METRIC_PREFIX_HITS = "vllm:prefix_cache_hits"
METRIC_GPU_CACHE = "vllm:gpu_cache_usage_perc"
# The KV-cache model's constants, calibrated on Llama-3-8B-Instruct, 1xH100-80GB-SXM, vLLM (Lambda's
# github.com/LambdaLabsML/vllm-benchmark @211b2ae, results/prompt_10/1xH100-80GB-SXM/
# Meta-Llama-3-8B-Instruct_tp1_len8192.json): 10 prompts of 1,369 tokens in all answered at median
# TTFT 62.1 ms (<= 45 us a token), median TPOT 7.50 ms; 128 KiB of KV a token = 64 MiB a 512-token
# block, ~54 GiB left on an H100 at gpu_memory_utilization 0.9: 860 blocks. docs/kv-routing.md.
BLOCK_TOKENS = 512
PREFILL_S_PER_TOKEN = 45e-6
DECODE_S_PER_TOKEN = 7.5e-3
KV_CAPACITY_BLOCKS = 860
MAX_KV_BLOCKS_PER_REQUEST = 8192
MAX_KV_TOKENS = MAX_KV_BLOCKS_PER_REQUEST * BLOCK_TOKENS
MAX_OUTPUT_TOKENS = 1_000_000
TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
                20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)


class KVCache:
    """Blocks held, least recently used first; at most `capacity` (the oldest go first).
    `on_add`/`on_evict` see each block that comes or goes (modelplane.kvroute's cluster summary
    keeps count of them)."""

    def __init__(self, capacity: int, on_add: Callable[[int], None] | None = None,
                 on_evict: Callable[[int], None] | None = None) -> None:
        self.capacity = capacity
        self.blocks: OrderedDict[int, None] = OrderedDict()
        self._on_add = on_add
        self._on_evict = on_evict

    def __len__(self) -> int:
        return len(self.blocks)

    def __contains__(self, block: int) -> bool:
        return block in self.blocks

    def prefix(self, blocks: Sequence[int]) -> int:
        """How many of `blocks`, from the first, are held (a prefix cache reuses a prefix only)."""
        held = self.blocks
        n = 0
        for b in blocks:
            if b not in held:
                break
            n += 1
        return n

    def touch(self, blocks: Sequence[int]) -> None:
        """Hold `blocks` as the most recently used, evicting the least recently used past capacity."""
        held = self.blocks
        for b in blocks:
            if b in held:
                held.move_to_end(b)
            else:
                held[b] = None
                if self._on_add is not None:
                    self._on_add(b)
        while len(held) > self.capacity:
            gone, _ = held.popitem(last=False)
            if self._on_evict is not None:
                self._on_evict(gone)

    @property
    def usage(self) -> float:
        return len(self.blocks) / self.capacity


def hit_tokens(matched_blocks: int, input_tokens: int, block_tokens: int) -> int:
    """Tokens a prefix hit of `matched_blocks` saves: never the prompt's last token (vLLM computes
    it again to yield the first output token)."""
    return max(0, min(matched_blocks * block_tokens, input_tokens - 1))


class KVModel:
    """The live engine's KV cache and prefill (module docstring): one prefill at a time, counted
    as vLLM counts its prefix cache."""

    def __init__(self, capacity: int, block_tokens: int = BLOCK_TOKENS, prefill_s: float = PREFILL_S_PER_TOKEN,
                 decode_s: float = DECODE_S_PER_TOKEN, time_scale: float = 1.0) -> None:
        self.cache = KVCache(capacity)
        self.block_tokens = block_tokens
        self.prefill_s = prefill_s
        self.decode_s = decode_s
        self.time_scale = time_scale
        self.queries = 0
        self.hits = 0
        self.running_blocks = 0
        self.lock = threading.Lock()
        self.prefill = threading.Lock()     # one prefill runs at a time

    def start(self, blocks: Sequence[int], prompt_tokens: int) -> float:
        """Look the prompt up and hold its blocks; the prefill's seconds (unscaled)."""
        with self.lock:
            hit = hit_tokens(self.cache.prefix(blocks), prompt_tokens, self.block_tokens)
            self.cache.touch(blocks)
            self.queries += prompt_tokens
            self.hits += hit
            self.running_blocks += len(blocks)
        return (prompt_tokens - hit) * self.prefill_s + self.decode_s

    def finish(self, blocks: Sequence[int]) -> None:
        with self.lock:
            self.running_blocks -= len(blocks)

    def usage(self) -> float:
        with self.lock:
            return min(self.running_blocks / self.cache.capacity, 1.0)


def kv_request(req: Any) -> tuple[list[int], int, int] | str | None:
    """(block ids, prompt tokens, output tokens) a request body asks the KV model for; None when it
    carries no `kv_block_hashes`; the reason (naming the field) when it is malformed."""
    if not isinstance(req, dict) or "kv_block_hashes" not in req:
        return None
    blocks, tokens, out = req.get("kv_block_hashes"), req.get("prompt_tokens"), req.get("max_tokens", 0)
    if not isinstance(blocks, list) or len(blocks) > MAX_KV_BLOCKS_PER_REQUEST or not all(
            type(b) is int and 0 <= b < 2 ** 63 for b in blocks):
        return f"kv_block_hashes: at most {MAX_KV_BLOCKS_PER_REQUEST} integers in 0..2^63-1"
    if type(tokens) is not int or not 1 <= tokens <= MAX_KV_TOKENS:
        return f"prompt_tokens: an integer in 1..{MAX_KV_TOKENS}"
    if type(out) is not int or not 0 <= out <= MAX_OUTPUT_TOKENS:
        return f"max_tokens: an integer in 0..{MAX_OUTPUT_TOKENS}"
    return blocks, tokens, out


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

    kv: KVModel | None = None

    def kv_cache_usage(self) -> float:
        if self.kv is not None:
            return self.kv.usage()
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
        if self.kv is not None:
            with self.kv.lock:
                queries, hits = self.kv.queries, self.kv.hits
            lines += [
                # prometheus_client's text format names a counter's family with its _total sample.
                f"# HELP {METRIC_PREFIX_QUERIES}_total Prefix cache queries, in terms of number of queried tokens.",
                f"# TYPE {METRIC_PREFIX_QUERIES}_total counter",
                f"{METRIC_PREFIX_QUERIES}_total{{{labels}}} {float(queries)}",
                f"# HELP {METRIC_PREFIX_HITS}_total Prefix cache hits, in terms of number of cached tokens.",
                f"# TYPE {METRIC_PREFIX_HITS}_total counter", f"{METRIC_PREFIX_HITS}_total{{{labels}}} {float(hits)}",
                f"# HELP {METRIC_GPU_CACHE} GPU KV-cache usage. 1 means 100 percent usage.",
                f"# TYPE {METRIC_GPU_CACHE} gauge", f"{METRIC_GPU_CACHE}{{{labels}}} {kv!r}",
            ]
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
            kv = kv_request(req) if state.queue.kv is not None else None
            if isinstance(kv, str):
                return self._send(400, {"error": {"message": kv}})
            extra = state.pd_answer(req, self.connection.getsockname()[1])
            with state.lock:
                state.in_flight += 1
            try:
                self._infer(path, model, stream=stream, extra=extra, kv=kv)
            finally:
                with state.lock:
                    state.in_flight -= 1

        def _infer(self, path: str, model: str, *, stream: bool, extra: dict[str, Any] | None = None,
                   kv: tuple[list[int], int, int] | None = None) -> None:
            arrived = state.queue.enter()   # waits while --concurrency requests run
            model_kv = state.queue.kv
            try:
                if state.delay:
                    time.sleep(state.delay)
                if kv is not None and model_kv is not None:
                    with model_kv.prefill:
                        seconds = model_kv.start(kv[0], kv[1])
                        if model_kv.time_scale:
                            time.sleep(seconds * model_kv.time_scale)
                    state.queue.first_token(arrived)
                    if model_kv.time_scale and kv[2]:
                        time.sleep(kv[2] * model_kv.decode_s * model_kv.time_scale)
                    model_kv.finish(kv[0])
                else:
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
    p.add_argument("--kv-blocks", type=int, default=None, metavar="N",
                   help="model a KV cache of N blocks for requests carrying kv_block_hashes (module docstring)")
    p.add_argument("--block-tokens", type=int, default=BLOCK_TOKENS, metavar="N")
    p.add_argument("--prefill-us-per-token", type=float, default=PREFILL_S_PER_TOKEN * 1e6, metavar="US")
    p.add_argument("--decode-ms-per-token", type=float, default=DECODE_S_PER_TOKEN * 1e3, metavar="MS")
    p.add_argument("--kv-time-scale", type=float, default=1.0, metavar="X",
                   help="multiply the KV model's prefill and decode times (0: count only, never wait)")
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
    if a.kv_blocks is not None and not (
            1 <= a.kv_blocks <= 10 ** 8 and 1 <= a.block_tokens <= 1 << 20
            and all(0 < v <= 1e6 for v in (a.prefill_us_per_token, a.decode_ms_per_token))
            and 0 <= a.kv_time_scale <= 1e3):
        print("--kv-blocks must be 1..1e8, --block-tokens 1..2^20, --prefill-us-per-token and "
              "--decode-ms-per-token in (0, 1e6], --kv-time-scale 0..1000", file=sys.stderr)
        return 2
    state = EngineState(a.name, a.deployment, a.fail_health_after, a.exit_after, key, a.delay_ms / 1000,
                        a.concurrency, a.stream_interval_ms / 1000)
    if a.kv_blocks is not None:
        state.queue.kv = KVModel(a.kv_blocks, a.block_tokens, a.prefill_us_per_token / 1e6,
                                 a.decode_ms_per_token / 1e3, a.kv_time_scale)
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
