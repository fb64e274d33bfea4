"""No hop resends a POST that may still be running (issue 27 item 3), through the real Traefik.

traefik/traefik pkg/middlewares/retry/retry.go (v3.7): a network error is retried only while
nothing of the request was written; a `status` retry with `retryNonIdempotentMethod` resends a
written POST. Behind a Classic Load Balancer (60 s idle timeout) a long completion was cut, the
control plane retried its 502, and the completion ran again on another GPU: here a stand-in
workload gateway reads each POST and drops the connection unanswered, as a load balancer that cut
the flow does; the control plane must pass the 502 on, never send the request again. A 503 (a
gateway that ran nothing) is still resent, body intact, and a workload gateway whose replica
connection broke answers 503 (pkg/middlewares/customerrors/custom_errors.go `statusRewrites`).
"""

from __future__ import annotations

import json
import socket
import struct
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx

from modelplane.gateway.config import ServiceRoute, control_plane_config, workload_config
from modelplane.routing import compute_weights, replica_endpoint
from modelplane.runtime.fleet import FAST
from modelplane.runtime.process import Traefik

from .helpers import NS, replica, select


class StandIn:
    """A server on 127.0.0.1 answering GETs (health checks) 200 and each POST as `mode` says:
    `cut` (read it whole, then reset the connection unanswered), `refuse` (503), `serve` (200).
    Records the id of every POST body it read."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.received: list[int] = []
        lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                self._answer(200, b"ok")

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with lock:
                    outer.received.append(int(json.loads(body)["id"]))
                if outer.mode == "cut":
                    # RST, no answer: what a peer sees of a flow a load balancer dropped.
                    self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    self.close_connection = True
                    self.connection.close()
                    return
                self._answer(503 if outer.mode == "refuse" else 200, f"{outer.mode}".encode())

            def _answer(self, code: int, body: bytes) -> None:
                self.send_response(code)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, name=f"stand-in-{mode}", daemon=True)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


@contextmanager
def stand_ins(*modes: str) -> Iterator[list[StandIn]]:
    servers = [StandIn(m) for m in modes]
    try:
        for s in servers:
            s.thread.start()
        yield servers
    finally:
        for s in servers:
            s.close()


def _routes(clusters: list[str]) -> list[ServiceRoute]:
    eps = [replica("qwen", i, c) for i, c in enumerate(clusters)]
    return [ServiceRoute(NS, "chat", tuple(compute_weights([select("qwen")], eps, namespace=NS)))]


def _traefik(fleet, name: str, config: dict) -> Traefik:
    gw = Traefik(name, fleet.work_dir, group=fleet.group)
    fleet._procs.append(gw)          # stopped with the fleet, whatever the outcome
    gw.wait_ready()
    gw.apply(config)
    return gw


def _post(url: str, ids: range) -> dict[int, int]:
    with httpx.Client(timeout=10) as c:
        return {i: c.post(url, json={"id": i}).status_code for i in ids}


def test_a_post_the_control_plane_wrote_is_never_sent_again(fleet) -> None:
    with stand_ins("cut", "serve") as (cut, serve):
        cp = _traefik(fleet, "control-plane-cut", control_plane_config(
            _routes(["cut", "ok"]), {"cut": cut.url, "ok": serve.url}, tuning=FAST))
        codes = _post(f"{cp.url}/{NS}/chat/v1/chat/completions", range(8))
    received = cut.received + serve.received
    assert sorted(received) == list(range(8)), f"each POST reaches one gateway once: {received}"
    assert cut.received, "the weighted round robin sends the cut cluster its share"
    assert {i: codes[i] for i in cut.received} == dict.fromkeys(cut.received, 502)
    assert {i: codes[i] for i in serve.received} == dict.fromkeys(serve.received, 200)


def test_a_503_the_gateway_ran_nothing_for_is_resent_with_its_body(fleet) -> None:
    with stand_ins("refuse", "serve") as (refuse, serve):
        cp = _traefik(fleet, "control-plane-refuse", control_plane_config(
            _routes(["busy", "ok"]), {"busy": refuse.url, "ok": serve.url}, tuning=FAST))
        codes = _post(f"{cp.url}/{NS}/chat/v1/chat/completions", range(8))
    assert codes == dict.fromkeys(range(8), 200)
    assert refuse.received and sorted(serve.received) == list(range(8))


def test_a_workload_gateway_whose_engine_connection_broke_answers_503(fleet) -> None:
    """Straight to the pod, a broken engine connection means no engine runs the request: the
    workload gateway tries its replicas, then answers 503 (not Traefik's 502) so the control
    plane may try another cluster."""
    with stand_ins("cut") as (engine,):
        eps = [replica_endpoint(NS, "qwen-0", "qwen", "west", 0, url=engine.url)]
        routes = [ServiceRoute(NS, "chat", tuple(compute_weights([select("qwen")], eps, namespace=NS)))]
        wl = _traefik(fleet, "gateway-west-cut", workload_config("west", routes, FAST))
        with httpx.Client(timeout=10) as c:
            r = c.post(f"{wl.url}/{NS}/chat/v1/chat/completions", json={"id": 7})
    assert r.status_code == 503
    assert engine.received == [7] * FAST.retry_attempts


