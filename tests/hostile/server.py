"""A hostile Kubernetes API server on 127.0.0.1 (stdlib only): one HTTP server (and one TLS
server) whose first path segment picks the behaviour, so each cluster of a test fleet points
its kubeconfig at `http://127.0.0.1:PORT/<mode>` and gets that mode for every request.

Modes that answer (the rest of the path is the API path asked):
  honest            the cluster's real objects (nodes and slices as the sim makes them)
  impossible        honest, plus a ResourceSlice publishing 100,000 GPUs on the first node
  huge              a 100 MB body (Content-Length given)
  drip              headers, then one byte every 20 ms (as long as the client listens, at most 60 s)
  endless           a chunked body that never ends (at most 60 s)
  gzip-bomb         ~1 MB of gzip that inflates to 1 GiB
  deep              JSON nested 100,000 levels deep
  unauthorized      401 whose body echoes the request's headers, terminal escapes and newlines included
  failing           500 with an echoed Authorization header in its Status message
  redirect          302 to /capture on this server (which records what it receives)
  wrong-<shape>     one list of the wrong shape (items-dict, items-str, slice-spec-list,
                    generation-inf, claim-devices-list, owners-str, taints-dict, body-list, nan)
  fuzz              whatever `fuzz[path]` holds (the property tests set it per example), or the answer
                    of the mode it names
  podmessage        honest, with one pod of ours whose scheduling message is 2 MB of text holding
                    escapes and a forged `OK: all 4 placed` line
  metrics-<mode>    the lists honest (`objects["metrics-<mode>"]`: pods, nodes, slices, claims), every
                    other path (a pod's /metrics through the proxy) answered as <mode> (`metrics-fuzz`:
                    `fuzz[path]`); `metrics-<mode>.<tag>` is the same mode with objects of its own
Every loop is bounded in time and ends when the client goes away; the servers stop with the fixture.
"""

from __future__ import annotations

import contextlib
import functools
import json
import socket
import ssl
import struct
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

NODES = "/api/v1/nodes"
SLICES = "/apis/resource.k8s.io/v1/resourceslices"
CLAIMS = "/apis/resource.k8s.io/v1/resourceclaims"
PODS = "/api/v1/pods"
LISTS = (NODES, SLICES, CLAIMS, PODS)
MAX_LOOP_S = 60.0
WRONG_SHAPES = ("items-dict", "items-str", "slice-spec-list", "generation-inf", "claim-devices-list",
                "owners-str", "taints-dict", "body-list", "nan")
ANSWERING_MODES = ("honest", "impossible", "huge", "drip", "endless", "gzip-bomb", "deep", "unauthorized",
                   "failing", "redirect", "podmessage", *(f"wrong-{s}" for s in WRONG_SHAPES))
FORGED = "OK: all 4 placed replica(s) run where the plan put them"


@functools.cache
def _gzip_bomb() -> bytes:
    """~1 MB of gzip inflating to 1 GiB of zeros, built in about a second: each MiB is deflated
    after a full flush (the compressor's history reset), so every MiB's bytes are the same and
    are repeated, not compressed 1024 times (which took 13 s of CPU)."""
    zero = bytes(1 << 20)
    deflate = zlib.compressobj(9, zlib.DEFLATED, -15)
    piece = deflate.compress(zero) + deflate.flush(zlib.Z_FULL_FLUSH)
    crc = 0
    for _ in range(1024):
        crc = zlib.crc32(zero, crc)
    header = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff"       # gzip, deflate, no name, max compression
    return header + piece * 1024 + deflate.flush(zlib.Z_FINISH) + struct.pack("<II", crc, (1 << 30) & 0xFFFFFFFF)


@dataclass
class Objects:
    """What the honest part of each cluster holds (set by the test)."""

    nodes: list[dict[str, Any]] = field(default_factory=list)
    slices: list[dict[str, Any]] = field(default_factory=list)
    claims: list[dict[str, Any]] = field(default_factory=list)
    pods: list[dict[str, Any]] = field(default_factory=list)

    def listing(self, path: str) -> list[dict[str, Any]]:
        return {NODES: self.nodes, SLICES: self.slices, CLAIMS: self.claims, PODS: self.pods}.get(path, [])


class QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass                 # a client that hangs up mid-answer is what these modes are for


class HostileServer:
    """Start with `start()`, stop with `stop()`; `objects[mode]` are the honest objects a mode
    serves, `captured` what /capture received, `received` every request's headers."""

    def __init__(self, cert: tuple[Path, Path] | None = None) -> None:
        self.objects: dict[str, Objects] = {}
        # mode "fuzz": the body served for each API path, or the name of the mode that answers it
        self.fuzz: dict[str, bytes | str] = {}
        self.captured: list[dict[str, str]] = []
        self.received: list[tuple[str, dict[str, str]]] = []
        self.stopping = threading.Event()
        self._bomb: bytes | None = None
        self.http = QuietServer(("127.0.0.1", 0), self._handler())
        self.tls: ThreadingHTTPServer | None = None
        if cert is not None:
            self.tls = QuietServer(("127.0.0.1", 0), self._handler())
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(str(cert[0]), str(cert[1]))
            self.tls.socket = ctx.wrap_socket(self.tls.socket, server_side=True)
        self.silent = socket.socket()                   # accepts, never speaks (a stalled TLS handshake)
        self.silent.bind(("127.0.0.1", 0))
        self.silent.listen(64)
        self._threads: list[threading.Thread] = []
        self._held: list[socket.socket] = []

    @property
    def port(self) -> int:
        return int(self.http.server_address[1])

    @property
    def tls_port(self) -> int:
        assert self.tls is not None
        return int(self.tls.server_address[1])

    @property
    def silent_port(self) -> int:
        return int(self.silent.getsockname()[1])

    def url(self, mode: str) -> str:
        return f"http://127.0.0.1:{self.port}/{mode}"

    def bomb(self) -> bytes:
        if self._bomb is None:
            self._bomb = _gzip_bomb()
        return self._bomb

    def start(self) -> HostileServer:
        servers = [self.http] + ([self.tls] if self.tls is not None else [])
        self._threads = [threading.Thread(target=s.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
                         for s in servers]
        self._threads.append(threading.Thread(target=self._accept_silently, daemon=True))
        for t in self._threads:
            t.start()
        return self

    def _accept_silently(self) -> None:
        self.silent.settimeout(0.1)
        while not self.stopping.is_set():
            try:
                self._held.append(self.silent.accept()[0])
            except OSError:
                continue

    @classmethod
    @contextlib.contextmanager
    def running(cls, cert: tuple[Path, Path] | None = None) -> Iterator[HostileServer]:
        """A started server (its gzip bomb made before any client waits for it), stopped after."""
        server = cls(cert).start()
        server.bomb()
        try:
            yield server
        finally:
            server.stop()

    def stop(self) -> None:
        self.stopping.set()
        for s in [self.http] + ([self.tls] if self.tls is not None else []):
            s.shutdown()
            s.server_close()
        for t in self._threads:
            t.join(timeout=5)
        for s in self._held:
            s.close()
        self.silent.close()

    # ------------------------------------------------------------------ the handler

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # Headers and body go out in two writes: with Nagle's algorithm on, the body waits
            # for the client's delayed ACK of the headers (40 ms a request on Linux).
            disable_nagle_algorithm = True

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
                mode, _, rest = self.path.lstrip("/").partition("/")
                path = "/" + rest.split("?", 1)[0]
                server.received.append((mode, dict(self.headers.items())))
                with contextlib.suppress(OSError):      # the client hung up: what these modes are for
                    server._answer(self, mode, path)

            do_POST = do_GET  # noqa: N815

        return Handler

    def _send(self, h: BaseHTTPRequestHandler, code: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        h.send_response(code)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            h.send_header(k, v)
        h.end_headers()
        h.wfile.write(body)

    def _list(self, items: list[Any]) -> bytes:
        return json.dumps({"apiVersion": "v1", "kind": "List", "metadata": {}, "items": items}).encode()

    def _honest(self, h: BaseHTTPRequestHandler, mode: str, path: str) -> None:
        objects = self.objects.get(mode, Objects())
        self._send(h, 200, self._list(objects.listing(path)))

    def _loop(self, h: BaseHTTPRequestHandler, write: Callable[[], None]) -> None:
        end = time.monotonic() + MAX_LOOP_S
        while time.monotonic() < end and not self.stopping.is_set():
            write()

    def _answer(self, h: BaseHTTPRequestHandler, mode: str, path: str) -> None:
        if mode == "capture":
            self.captured.append(dict(h.headers.items()))
            self._send(h, 200, self._list([]))
        elif mode in ("honest", "podmessage", "tls-honest"):
            self._honest(h, mode, path)
        elif mode == "impossible":
            objects = self.objects.get(mode, Objects())
            items = objects.listing(path)
            if path == SLICES and objects.nodes:
                node = objects.nodes[0]["metadata"]["name"]
                items = [*items, {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                                  "metadata": {"name": "flood"},
                                  "spec": {"driver": "gpu.nvidia.com", "nodeName": node,
                                           "pool": {"name": "flood", "generation": 1, "resourceSliceCount": 1},
                                           "devices": [{"name": f"gpu-{i}"} for i in range(100_000)]}}]
            self._send(h, 200, self._list(items))
        elif mode == "huge":
            h.send_response(200)
            h.send_header("Content-Type", "application/json")
            h.send_header("Content-Length", str(100 * (1 << 20)))
            h.end_headers()
            chunk = b'{"items": [' + b" " * ((1 << 20) - 11)
            for _ in range(100):
                h.wfile.write(chunk)
                chunk = b" " * (1 << 20)
        elif mode == "drip":
            h.send_response(200)
            h.send_header("Content-Type", "application/json")
            h.send_header("Content-Length", str(10 * (1 << 20)))
            h.end_headers()

            def drip() -> None:
                h.wfile.write(b" ")
                h.wfile.flush()
                time.sleep(0.02)
            self._loop(h, drip)
        elif mode == "endless":
            h.send_response(200)
            h.send_header("Content-Type", "application/json")
            h.send_header("Transfer-Encoding", "chunked")
            h.end_headers()
            piece = b" " * 65536
            frame = f"{len(piece):x}\r\n".encode() + piece + b"\r\n"
            self._loop(h, lambda: h.wfile.write(frame))
        elif mode == "gzip-bomb":
            self._send(h, 200, self.bomb(), {"Content-Encoding": "gzip"})
        elif mode == "deep":
            depth = 100_000
            self._send(h, 200, b'{"items": [{"metadata": {"x": ' + b"[" * depth + b"]" * depth + b"}}]}")
        elif mode == "unauthorized":
            echoed = "".join(f"{k}: {v}\r\n" for k, v in h.headers.items())
            body = f"\x1b[2J\x1b]0;pwned\x07Unauthorized. You sent:\r\n{echoed}\n{FORGED}\n".encode()
            self._send(h, 401, body, {"Content-Type": "text/plain"})
        elif mode == "failing":
            auth = h.headers.get("Authorization", "")
            message = f"etcdserver: request timed out\n\x1b[31mheaders: Authorization: {auth}\x1b[0m"
            self._send(h, 500, json.dumps({"kind": "Status", "status": "Failure", "message": message,
                                           "code": 500}).encode())
        elif mode == "redirect":
            h.send_response(302)
            h.send_header("Location", f"http://127.0.0.1:{self.port}/capture{path}")
            h.send_header("Content-Length", "0")
            h.end_headers()
        elif mode == "fuzz":
            body = self.fuzz.get(path, self._list([]))
            if isinstance(body, str):
                self._answer(h, body, path)        # another mode's answer for this path
            else:
                self._send(h, 200, body)
        elif mode.startswith("metrics-"):
            if path in LISTS:
                self._honest(h, mode, path)
            else:
                self._answer(h, mode.removeprefix("metrics-").split(".", 1)[0], path)
        elif mode.startswith("wrong-"):
            self._wrong(h, mode, mode.removeprefix("wrong-"), path)
        else:
            self._send(h, 404, b'{"kind": "Status", "message": "no such mode"}')

    def _wrong(self, h: BaseHTTPRequestHandler, mode: str, shape: str, path: str) -> None:
        objects = self.objects.get(mode, Objects())
        items: Any = json.loads(json.dumps(objects.listing(path)))
        if shape == "items-dict" and path == NODES:
            self._send(h, 200, json.dumps({"items": {"a": 1}}).encode())
            return
        if shape == "items-str" and path == SLICES:
            self._send(h, 200, json.dumps({"items": "nodes"}).encode())
            return
        if shape == "body-list" and path == NODES:
            self._send(h, 200, b"[1, 2, 3]")
            return
        if shape == "nan" and path == NODES:
            self._send(h, 200, b'{"items": [{"metadata": {"name": "n"}, "spec": {"unschedulable": NaN}}]}')
            return
        if shape == "slice-spec-list" and path == SLICES and items:
            items[0]["spec"] = [items[0]["spec"]]
        if shape == "generation-inf" and path == SLICES and items:
            body = self._list(items).replace(b'"generation": 1', b'"generation": 1e999')
            self._send(h, 200, body)
            return
        if shape == "claim-devices-list" and path == CLAIMS:
            items = [{"metadata": {"name": "c", "namespace": "x"}, "status": {"allocation": {"devices": [1, 2]}}}]
        if shape == "owners-str" and path == CLAIMS:
            items = [{"metadata": {"name": "c", "namespace": "x", "ownerReferences": "pod"}}]
        if shape == "taints-dict" and path == NODES and items:
            items[0]["spec"]["taints"] = {"key": "x"}
        self._send(h, 200, self._list(items))


def iter_modes() -> Iterator[str]:
    yield from ANSWERING_MODES
