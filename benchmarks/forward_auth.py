"""The alternative to the callerauth plugin, measured by benchmarks/gateway.py only: a
ForwardAuth server (stdlib, one Python process) that Traefik asks about every request.

    python benchmarks/forward_auth.py --listen-fd FD --keys-dir DIR

Answers 200 with `X-Modelplane-Caller` when the request's bearer key hashes to one of the
callers in DIR (file name = caller, content = key), else 401. Not shipped: it exists to
price a ForwardAuth design against the plugin on the same machine in the same run.
"""
from __future__ import annotations

import argparse
import hashlib
import hmac
import socket
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--listen-fd", type=int, required=True)
    p.add_argument("--keys-dir", required=True)
    a = p.parse_args()
    callers = {hashlib.sha256(f.read_bytes().strip()).digest(): f.name
               for f in Path(a.keys_dir).iterdir() if not f.name.startswith(".")}

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            auth = self.headers.get("Authorization", "")
            digest = hashlib.sha256(auth[7:].strip().encode()).digest() if auth.startswith("Bearer ") else b""
            found = ""
            for h, name in callers.items():
                if hmac.compare_digest(h, digest) and not found:
                    found = name
            self.send_response(200 if found else 401)
            if found:
                self.send_header("X-Modelplane-Caller", found)
            self.send_header("Content-Length", "0")
            self.end_headers()

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler, bind_and_activate=False)
    server.socket.close()
    server.socket = socket.socket(fileno=a.listen_fd)
    server.daemon_threads = True
    server.serve_forever(poll_interval=0.1)


if __name__ == "__main__":
    main()
