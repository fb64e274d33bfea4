"""The hostile API server (tests/hostile/server.py) started once per module and stopped after it,
a fleet with one cluster per hostile mode, and a kubeconfig directory pointing each cluster at
its mode (all with the same bearer token, which nothing may ever print or store)."""

from __future__ import annotations

import base64
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from modelplane.api import Fleet, load_documents
from sim.pki import serving_cert
from tests import manifests as g
from tests.hostile.server import ANSWERING_MODES, HostileServer, Objects
from tests.unit.observe.objects import cluster_objects

TOKEN = "hostile-test-token-0123456789abcdef"
TLS_MODES = ("tls-honest", "tls-untrusted", "tls-plain", "tls-stall")
# What each mode must read as: observed, NotRead ("not observed (...)") or Unreachable.
OBSERVED, NOT_READ, UNREACHABLE = "observed", "not-read", "unreachable"
EXPECTED = {
    "honest": OBSERVED, "impossible": OBSERVED, "podmessage": OBSERVED, "tls-honest": OBSERVED,
    "huge": NOT_READ, "endless": NOT_READ, "gzip-bomb": NOT_READ, "deep": NOT_READ, "unauthorized": NOT_READ,
    "redirect": NOT_READ, "tls-untrusted": NOT_READ, "tls-plain": NOT_READ,
    "drip": UNREACHABLE, "failing": UNREACHABLE, "tls-stall": UNREACHABLE, "refused": UNREACHABLE,
    **{m: NOT_READ for m in ANSWERING_MODES if m.startswith("wrong-")},
}
GPUS_PER_NODE = 8
GPUS_PER_REPLICA = 4


def fleet_documents(clusters: list[str]) -> list[dict[str, Any]]:
    cls = g.inference_class("h100x8", g.device("gpu", GPUS_PER_NODE, "81559Mi"))
    return [cls, *(g.cluster(c, g.pool("gpu", "h100x8", 1)) for c in clusters),
            g.deployment("chat", 2 * len(clusters) + 5, g.engine("main", g.standalone(GPUS_PER_REPLICA)))]


def kubeconfig(path: Path, server: str, ca_pem: bytes | None = None) -> Path:
    cluster: dict[str, Any] = {"server": server}
    if ca_pem is not None:
        cluster["certificate-authority-data"] = base64.b64encode(ca_pem).decode()
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": cluster}], "users": [{"name": "u", "user": {"token": TOKEN}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}))
    return path


def closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = int(s.getsockname()[1])
    s.close()
    return port


@dataclass
class HostileFleet:
    server: HostileServer
    documents: list[dict[str, Any]]
    fleet: Fleet
    manifests: Path               # a directory with the fleet's YAML
    kubeconfigs: Path             # one <cluster>.yaml per cluster

    @property
    def clusters(self) -> list[str]:
        return sorted(self.fleet.clusters)


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostileFleet]:
    base = tmp_path_factory.mktemp("hostile")
    cert, key = serving_cert(base / "server", "127.0.0.1")
    other_cert, _ = serving_cert(base / "other", "someone-else")
    server = HostileServer((cert, key)).start()
    server.bomb()                                  # made before any client waits for it
    try:
        clusters = sorted(EXPECTED)
        documents = fleet_documents(clusters)
        fleet = load_documents(documents)
        for mode in clusters:
            nodes, slices = cluster_objects(fleet, mode)
            server.objects[mode] = Objects(nodes, slices)
        (base / "manifests").mkdir()
        (base / "manifests" / "fleet.yaml").write_text(g.to_yaml(documents))
        configs = base / "kubeconfigs"
        configs.mkdir()
        for mode in clusters:
            if mode == "tls-honest":
                url, ca = f"https://127.0.0.1:{server.tls_port}/tls-honest", cert.read_bytes()
            elif mode == "tls-untrusted":
                url, ca = f"https://127.0.0.1:{server.tls_port}/honest", other_cert.read_bytes()
            elif mode == "tls-plain":
                url, ca = f"https://127.0.0.1:{server.port}/honest", cert.read_bytes()
            elif mode == "tls-stall":
                url, ca = f"https://127.0.0.1:{server.silent_port}", cert.read_bytes()
            elif mode == "refused":
                url, ca = f"http://127.0.0.1:{closed_port()}", None
            else:
                url, ca = server.url(mode), None
            kubeconfig(configs / f"{mode}.yaml", url, ca)
        yield HostileFleet(server, documents, fleet, base / "manifests", configs)
    finally:
        server.stop()
