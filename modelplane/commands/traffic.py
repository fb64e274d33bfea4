"""`python -m modelplane split URL [-n 200]`: how a service URL splits its traffic.

Sends N sequential chat completions to `URL/v1/chat/completions` and counts who served
each one (the mock engine's `X-Served-By`, else the "served by <replica>" text). Only
status, body and that header are read; request and response headers are never printed,
so a credential added by a gateway cannot leak through this command. What a server says
is printed without control characters, and URLs without user-info.

`--timeout` bounds each whole request (connect, send, headers and body), not each read:
a server that drips its answer byte by byte is cut off when the time is up.
"""
from __future__ import annotations

import argparse
import contextlib
import errno
import math
import os
import re
import socket
import ssl
import sys
import threading
import time
import unicodedata
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import TextIO

import httpx

from modelplane.commands.parsers import Subparsers
from modelplane.files import FileReadError, read_regular_file
from modelplane.json_types import JsonMapping, JsonObject
from modelplane.redact import redact_url
from modelplane.runtime.process import Terminated, terminate_on_signals
from modelplane.urls import header_safe, url_problem
from modelplane.words import counted

UNIDENTIFIED = "(unidentified)"
TIMEOUT = "Timeout"  # the error kind of a request that ran out of --timeout
MAX_TIMEOUT = 24 * 3600.0
MAX_NAME = 100  # longest replica or deployment name printed as a server sent it
MAX_CLIENTS = 256  # split --concurrency
_SERVED = re.compile(r"served by ([A-Za-z0-9._-]+)")
_HASHED = re.compile(r"^(.+)-([0-9a-f]{5}|\d+)$")


def printable(text: str, limit: int = MAX_NAME) -> str:
    """A server-supplied string as it may be printed: no control or format characters
    (terminal escapes, carriage returns, bidi overrides), at most `limit` characters."""
    clean = "".join(c for c in text if not unicodedata.category(c).startswith("C"))
    return clean if len(clean) <= limit else clean[: limit - 3] + "..."


@dataclass
class SplitResult:
    url: str
    sequence: list[str | None] = field(default_factory=list)  # replica per request, None = failed
    deployments: dict[str, str] = field(default_factory=dict)  # replica -> deployment
    errors: Counter[str] = field(default_factory=Counter)
    seconds: float = 0.0

    @property
    def failed(self) -> int:
        return sum(1 for r in self.sequence if r is None)

    @property
    def by_replica(self) -> Counter[str]:
        return Counter(r for r in self.sequence if r is not None)

    @property
    def by_deployment(self) -> Counter[str]:
        return Counter(self.deployments.get(r, r) for r in self.sequence if r is not None)


def _deployment_of(replica: str) -> str:
    m = _HASHED.match(replica)
    return m.group(1) if m else replica


class _Deadline:
    """Ends a request when `seconds` have passed, whatever it is doing.

    httpx timeouts bound each network operation, so a body that drips one byte per
    second never times out. This shuts the request's socket down at the deadline
    instead (the blocked read then returns); the socket comes from httpcore's documented
    `trace` extension when the connection is made, so the client must not reuse
    connections (each request makes its own)."""

    def __init__(self, seconds: float) -> None:
        self.expired = False
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True

    def __enter__(self) -> _Deadline:
        self._timer.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._timer.cancel()

    def trace(self, event: str, info: JsonMapping) -> None:
        if event != "connection.connect_tcp.complete":
            return
        sock = info["return_value"].get_extra_info("socket")
        with self._lock:
            self._sockets.append(sock)
            if self.expired:
                self._shut(sock)

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            for sock in self._sockets:
                self._shut(sock)

    @staticmethod
    def _shut(sock: socket.socket) -> None:
        with contextlib.suppress(OSError):  # already closed: the request is over anyway
            sock.shutdown(socket.SHUT_RDWR)


def tls_context(cafile: str | None) -> ssl.SSLContext:
    """Server certificates verified against the system's roots, or only against `cafile`
    (a self-signed edge certificate, a private CA)."""
    return ssl.create_default_context(cafile=cafile) if cafile else ssl.create_default_context()


def run_split(url: str, n: int = 200, model: str = "default", timeout: float = 10.0,
              on_request: Callable[[int, SplitResult], None] | None = None, *,
              api_key: str | None = None, cafile: str | None = None,
              verify: ssl.SSLContext | None = None) -> SplitResult:
    """Send n requests; `on_request(i, result)` runs after each (fault tests use it).
    `api_key` is sent as `Authorization: Bearer`; https answers are verified against
    `verify`, else `cafile`, else the system's roots."""
    target = url.rstrip("/") + "/v1/chat/completions"
    body = {"model": model, "messages": [{"role": "user", "content": "who are you?"}]}
    res = SplitResult(url)
    start = time.perf_counter()
    limits = httpx.Limits(max_keepalive_connections=0)  # see _Deadline
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else None
    context = verify if verify is not None else tls_context(cafile)
    with httpx.Client(timeout=timeout, limits=limits, headers=headers, verify=context) as client:
        try:
            for i in range(n):
                res.sequence.append(_one(client, target, body, timeout, res))
                if on_request is not None:
                    on_request(i, res)
        finally:
            res.seconds = time.perf_counter() - start
    return res


class Load:
    """Clients in parallel, each sending chat completions one after the other through `url`,
    as many as `set_clients` asks for at a time: `split --concurrency` and the demo's load
    steps. Every answer is recorded with its time (`served`: (time.time(), replica or None));
    `result` counts them as `run_split` does."""

    def __init__(self, url: str, *, model: str = "default", timeout: float = 10.0, api_key: str | None = None,
                 verify: ssl.SSLContext | None = None, cafile: str | None = None, stream: bool = False) -> None:
        self.url = url
        self.result = SplitResult(url)
        self.served: list[tuple[float, str | None]] = []
        self._target = url.rstrip("/") + "/v1/chat/completions"
        self._body: JsonObject = {"model": model, "messages": [{"role": "user", "content": "who are you?"}],
                                      **({"stream": True} if stream else {})}
        self._timeout = timeout
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else None
        self._verify = verify if verify is not None else tls_context(cafile)
        self._lock = threading.Lock()
        self._workers: list[tuple[threading.Thread, threading.Event]] = []
        self._started = time.perf_counter()
        self._budget: int | None = None

    def _work(self, stop: threading.Event) -> None:
        limits = httpx.Limits(max_keepalive_connections=0)  # see _Deadline
        with httpx.Client(timeout=self._timeout, limits=limits, headers=self._headers, verify=self._verify) as client:
            while not stop.is_set():
                with self._lock:
                    if self._budget is not None:
                        if self._budget <= 0:
                            return
                        self._budget -= 1
                errors = SplitResult(self.url)
                replica = _one(client, self._target, self._body, self._timeout, errors)
                with self._lock:
                    self.result.sequence.append(replica)
                    self.result.errors.update(errors.errors)
                    for rep, dep in errors.deployments.items():
                        self.result.deployments.setdefault(rep, dep)
                    self.served.append((time.time(), replica))

    def set_clients(self, count: int) -> None:
        """Start or stop clients until `count` run (a stopped one finishes its request first)."""
        while len(self._workers) < count:
            stop = threading.Event()
            thread = threading.Thread(target=self._work, args=(stop,), daemon=True, name="split-client")
            self._workers.append((thread, stop))
            thread.start()
        while len(self._workers) > count:
            thread, stop = self._workers.pop()
            stop.set()
            thread.join(self._timeout + 1)

    def run(self, n: int, clients: int) -> SplitResult:
        """Exactly `n` requests over `clients` clients, then stop."""
        self._budget = n
        self.set_clients(clients)
        for thread, _ in self._workers:
            thread.join()
        self._workers.clear()
        self.result.seconds = time.perf_counter() - self._started
        return self.result

    def stop(self) -> SplitResult:
        self.set_clients(0)
        self.result.seconds = time.perf_counter() - self._started
        return self.result


def _one(client: httpx.Client, target: str, body: JsonObject, timeout: float, res: SplitResult) -> str | None:
    """One request: the replica that answered, or None (the error is counted in res)."""
    with _Deadline(timeout) as deadline:
        try:
            request = client.build_request("POST", target, json=body, extensions={"trace": deadline.trace})
            r = client.send(request)
        except httpx.HTTPError as e:
            res.errors[TIMEOUT if deadline.expired else connect_problem(target, e) or type(e).__name__] += 1
            return None
    if r.status_code != 200:
        res.errors[f"HTTP {r.status_code}"] += 1
        return None
    served = r.headers.get("x-served-by")
    replica = printable(served) if served else None
    if not replica:
        m = _SERVED.search(r.text)
        replica = m.group(1)[:MAX_NAME] if m else None
    if replica:
        dep = r.headers.get("x-modelplane-deployment")
        res.deployments.setdefault(replica, printable(dep) if dep else _deployment_of(replica))
        return replica
    # A success all the same, e.g. a SaaS provider that names no replica.
    res.deployments.setdefault(UNIDENTIFIED, UNIDENTIFIED)
    return UNIDENTIFIED


def connect_problem(url: str, error: BaseException) -> str | None:
    """`nothing listening at HOST:PORT` when the connection was refused, `cannot resolve HOST`
    when the name has no address; None for any other failure."""
    parsed = httpx.URL(url)
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    host = parsed.host
    seen: BaseException | None = error
    for _ in range(10):                      # httpx -> httpcore -> the socket's OSError
        if seen is None:
            break
        if isinstance(seen, ConnectionRefusedError) or (isinstance(seen, OSError) and seen.errno == errno.ECONNREFUSED):
            return f"nothing listening at {host}:{port}"
        if isinstance(seen, socket.gaierror):
            return f"cannot resolve {host}"
        seen = seen.__cause__ or seen.__context__
    text = str(error)
    if "Connection refused" in text:
        return f"nothing listening at {host}:{port}"
    if "Name or service not known" in text or "nodename nor servname" in text:
        return f"cannot resolve {host}"
    return None


def probe(url: str, api_key: str | None = None, *, cafile: str | None = None, timeout: float = 10.0
          ) -> tuple[int | None, str]:
    """One chat completion through `url`: its HTTP status (None when no answer came) and what it
    says, printable: `Retry-After: N` for a 429, the error kind for no answer."""
    target = url.rstrip("/") + "/v1/chat/completions"
    body = {"model": "default", "messages": [{"role": "user", "content": "who are you?"}]}
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else None
    limits = httpx.Limits(max_keepalive_connections=0)
    with httpx.Client(timeout=timeout, limits=limits, headers=headers, verify=tls_context(cafile)) as client, \
            _Deadline(timeout) as deadline:
        try:
            r = client.send(client.build_request("POST", target, json=body, extensions={"trace": deadline.trace}))
        except httpx.HTTPError as e:
            return None, TIMEOUT if deadline.expired else connect_problem(target, e) or type(e).__name__
    retry = r.headers.get("retry-after")
    return r.status_code, f"Retry-After: {printable(retry, 20)}" if retry else ""


def _table(title: str, counts: Counter[str], total: int) -> list[str]:
    rows = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    width = max([len(title)] + [len(k) for k, _ in rows])
    lines = [f"  {title:<{width}}  {'requests':>8}  {'share':>7}"]
    for k, v in rows:
        lines.append(f"  {k:<{width}}  {v:>8}  {100.0 * v / total if total else 0:>6.1f}%")
    return lines


def format_result(res: SplitResult, idle: dict[str, str] | None = None) -> str:
    """`idle` (replica -> deployment) lists replicas to show even with 0 requests, so a
    drained replica reads as 60/0 rather than disappearing from the table."""
    total = len(res.sequence)
    replicas, deployments = res.by_replica, res.by_deployment
    for rep, dep in (idle or {}).items():
        replicas.setdefault(rep, 0)
        deployments.setdefault(dep, 0)
    lines = [f"{printable(redact_url(res.url), 2000)}: {counted(total, 'request')} in {res.seconds:.2f}s"]
    lines += _table("replica", replicas, total)
    lines += _table("deployment", deployments, total)
    detail = ", ".join(f"{k} x{v}" for k, v in sorted(res.errors.items()))
    lines.append(f"  failed: {res.failed}" + (f" ({detail})" if detail else ""))
    return "\n".join(lines)


def seconds(text: str) -> float:
    """argparse type of --timeout: a finite, positive number of seconds."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {printable(text)!r}") from None
    if not math.isfinite(value) or value <= 0 or value > MAX_TIMEOUT:
        raise argparse.ArgumentTypeError(f"must be more than 0 and at most {MAX_TIMEOUT:.0f} seconds, got {text}")
    return value


MAX_KEY_BYTES = 4096


class ApiKeySourceError(ValueError):
    """Why --api-key could not be read; never quotes the key."""


def read_api_key(source: str, stdin: TextIO | None = None) -> str:
    """The API key named by `source`: `env:VAR`, `file:PATH` or `-` (standard input). Never the
    key itself on the command line, where the process list and shell history would show it."""
    if source == "-":
        text = (stdin or sys.stdin).read(MAX_KEY_BYTES + 1)
        where = "standard input"
    elif source.startswith("env:"):
        name = source[4:]
        text, where = os.environ.get(name, ""), f"environment variable {printable(name)}"
    elif source.startswith("file:"):
        path = source[5:]
        where = f"file {printable(path, 500)}"
        try:
            # A regular file only: a FIFO with no writer used to hang split for ever.
            text = read_regular_file(path, "the --api-key file", MAX_KEY_BYTES + 1).decode("utf-8", "replace")
        except FileReadError as e:
            raise ApiKeySourceError(f"--api-key: {e}") from None
    else:
        raise ApiKeySourceError("--api-key takes env:VAR, file:PATH or - (standard input), never the key itself: "
                                "on the command line it would show in the process list and the shell history")
    if len(text) > MAX_KEY_BYTES:
        raise ApiKeySourceError(f"--api-key: {where} holds more than {MAX_KEY_BYTES} bytes")
    key = text.strip()
    if not header_safe(key):
        # It goes into a header: visible ASCII only (a non-ASCII key made httpx raise mid-run).
        raise ApiKeySourceError(f"--api-key: {where} holds no key (a key is one line of visible ASCII "
                                "characters; this one is empty or holds spaces, control or non-ASCII characters)")
    return key


def add_parser(subparsers: Subparsers) -> None:
    p = subparsers.add_parser("split", help="send N requests through a service URL and count who served them")
    p.add_argument("url", help="service URL, e.g. http://127.0.0.1:8000/ml-team/chat")
    p.add_argument("-n", type=int, default=200, help="number of requests (default 200)")
    p.add_argument("--model", default="default", help="model name sent in the request body")
    p.add_argument("--concurrency", "-c", type=int, default=1, metavar="N",
                   help="clients sending at once, each one request after the other (default 1: the exact "
                        "sequential split)")
    p.add_argument("--timeout", type=seconds, default=10.0,
                   help="seconds each whole request may take, body included (default 10)")
    p.add_argument("--api-key", metavar="SOURCE", default=None,
                   help="send the caller's API key (Authorization: Bearer), read from env:VAR, file:PATH or - "
                        "(standard input); never the key itself")
    p.add_argument("--cacert", metavar="FILE", default=None,
                   help="verify https answers against this certificate (a self-signed edge certificate, a "
                        "private CA) instead of the system's roots")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.n < 1:
        print("split: -n must be at least 1", file=sys.stderr)
        return 2
    if not 1 <= args.concurrency <= MAX_CLIENTS:
        print(f"split: --concurrency must be 1..{MAX_CLIENTS}", file=sys.stderr)
        return 2
    problem = url_problem(args.url)
    if problem:
        print(f"split: {printable(redact_url(args.url), 2000)}: {problem}", file=sys.stderr)
        return 2
    try:
        key = read_api_key(args.api_key) if args.api_key is not None else None
        if args.cacert is not None and not os.path.isfile(args.cacert):
            raise ApiKeySourceError(f"--cacert: {printable(args.cacert, 500)} is not a readable file")
        verify = tls_context(args.cacert)
    except ApiKeySourceError as e:
        print(f"split: {e}", file=sys.stderr)
        return 2
    except (ssl.SSLError, OSError) as e:
        print(f"split: --cacert: not a certificate file ({type(e).__name__})", file=sys.stderr)
        return 2
    if key is not None and args.url.lower().startswith("http://"):
        print(f"split: warning: the API key goes to {printable(redact_url(args.url), 2000)} over plain http: anyone "
              "on the path can read it; use the gateway's https:// URL", file=sys.stderr)
    try:
        with terminate_on_signals():
            if args.concurrency == 1:
                res = run_split(args.url, args.n, args.model, args.timeout, api_key=key, verify=verify)
            else:
                res = Load(args.url, model=args.model, timeout=args.timeout, api_key=key,
                           verify=verify).run(args.n, args.concurrency)
    except Terminated as t:
        print(f"split: interrupted by {t.name}", file=sys.stderr)
        return 128 + t.signum
    print(format_result(res))
    return 1 if res.failed else 0
