"""A forward HTTP proxy on 127.0.0.1 (stdlib only) that reaches one upstream whatever host a
request names, as a proxy into a private network would: `GET http://any-host/path` is sent on
to the upstream's plain port, `CONNECT any-host:443` is tunnelled to its TLS port. Every request
line it receives is recorded (`seen`), so a test tells a request that went through the proxy
from one that did not. Stopped with `stop()`; every tunnel ends when either side closes."""

from __future__ import annotations

import contextlib
import http.client
import select
import socket
import threading
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import urlsplit

from tests.hostile.server import QuietServer

TUNNEL_IDLE_S = 5.0


class ForwardProxy:
    def __init__(self, upstream_port: int, upstream_tls_port: int | None = None) -> None:
        self.seen: list[str] = []
        self.stopping = threading.Event()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
                proxy.seen.append(f"{self.command} {self.path}")
                parts = urlsplit(self.path)
                path = parts.path + (f"?{parts.query}" if parts.query else "")
                upstream = http.client.HTTPConnection("127.0.0.1", upstream_port, timeout=10)
                try:
                    upstream.request(self.command, path, headers={k: v for k, v in self.headers.items()
                                                                  if k.lower() not in ("proxy-connection", "host")})
                    answer = upstream.getresponse()
                    body = answer.read(64 << 20)
                finally:
                    upstream.close()
                self.send_response(answer.status)
                for k, v in answer.getheaders():
                    if k.lower() not in ("content-length", "transfer-encoding", "connection"):
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_CONNECT(self) -> None:  # noqa: N802 - the stdlib's name
                proxy.seen.append(f"CONNECT {self.path}")
                if upstream_tls_port is None:
                    self.send_error(502)
                    return
                upstream = socket.create_connection(("127.0.0.1", upstream_tls_port), timeout=10)
                self.send_response(200, "Connection established")
                self.end_headers()
                proxy._pipe(self.connection, upstream)
                self.close_connection = True

        self.server = QuietServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def _pipe(self, a: socket.socket, b: socket.socket) -> None:
        try:
            while not self.stopping.is_set():
                ready, _, _ = select.select([a, b], [], [], TUNNEL_IDLE_S)
                if not ready:
                    return
                for src in ready:
                    data = src.recv(65536)
                    if not data:
                        return
                    (b if src is a else a).sendall(data)
        except OSError:
            return
        finally:
            with contextlib.suppress(OSError):
                b.close()

    def start(self) -> ForwardProxy:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(timeout=5)
