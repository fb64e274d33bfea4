"""Issue 30's kubeconfig items against the hostile API server and a recording forward proxy
(tests/hostile/proxy.py), one cluster read at a time: a cluster without `server:` is a broken
credential (NotRead, nothing sent), a port past 65535 never reaches another port, and
`proxy-url`, `tls-server-name` and the environment's proxies work as client-go's do
(tests/unit/kube/test_hardening.py cites the client-go and golang/net files of each rule)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from modelplane.observe.read import ClusterRead, NotRead, Unreachable, read_cluster
from sim.pki import serving_cert
from tests.hostile.checks import assert_clean
from tests.hostile.conftest import TOKEN, HostileFleet, kubeconfig
from tests.hostile.proxy import ForwardProxy
from tests.hostile.server import HostileServer

pytestmark = pytest.mark.integration

NAME = "kube.internal"               # the only name the named server's certificate is valid for
UNROUTABLE = "cluster.invalid"       # .invalid never resolves (RFC 6761): reachable only by the proxy


@pytest.fixture(scope="module")
def named(tmp_path_factory: pytest.TempPathFactory, hostile: HostileFleet) -> Iterator[tuple[HostileServer, bytes]]:
    """A TLS API server on 127.0.0.1 whose certificate names kube.internal only, and its CA."""
    cert, key = serving_cert(tmp_path_factory.mktemp("named"), NAME, dns_name=NAME)
    server = HostileServer(cert=(cert, key)).start()
    server.objects["tls-honest"] = hostile.server.objects["tls-honest"]
    try:
        yield server, cert.read_bytes()
    finally:
        server.stop()


@pytest.fixture
def proxy(hostile: HostileFleet, named: tuple[HostileServer, bytes]) -> Iterator[ForwardProxy]:
    p = ForwardProxy(hostile.server.port, named[0].tls_port).start()
    try:
        yield p
    finally:
        p.stop()


def config(path: Path, server: str, ca: bytes | None = None, **cluster: Any) -> Path:
    kubeconfig(path, server, ca)
    doc = yaml.safe_load(path.read_text())
    doc["clusters"][0]["cluster"].update(cluster)
    path.write_text(yaml.safe_dump(doc))
    return path


def test_30_4_a_cluster_without_server_is_not_read_and_nothing_is_sent(hostile: HostileFleet, tmp_path: Path) -> None:
    path = config(tmp_path / "k.yaml", "http://unused")
    doc = yaml.safe_load(path.read_text())
    del doc["clusters"][0]["cluster"]["server"]
    path.write_text(yaml.safe_dump(doc))
    found = read_cluster("noserver", path, timeout=2.0)
    # NotRead: a broken credential, never an outage (which would move its replicas after 300 s).
    assert isinstance(found, NotRead) and "has no server" in found.reason, found
    assert_clean(found.reason)


def test_30_5_a_port_past_65535_never_reaches_another_port(hostile: HostileFleet, tmp_path: Path) -> None:
    wrapped = hostile.server.port + 65536           # once delivered the token to hostile.server.port
    before = len(hostile.server.received)
    found = read_cluster("wrapped", config(tmp_path / "k.yaml", f"http://127.0.0.1:{wrapped}/wrapped"), 2.0)
    assert isinstance(found, NotRead) and "invalid port" in found.reason, found
    assert not [m for m, _ in hostile.server.received[before:] if m == "wrapped"]


def test_30_6_a_cluster_reachable_only_through_its_proxy_url_is_read(hostile: HostileFleet, proxy: ForwardProxy,
                                                                      tmp_path: Path) -> None:
    server = f"http://{UNROUTABLE}/honest"
    alone = read_cluster("proxied", config(tmp_path / "direct.yaml", server), 2.0)
    assert isinstance(alone, Unreachable), alone             # what a dropped proxy-url made of it
    found = read_cluster("proxied", config(tmp_path / "k.yaml", server, **{"proxy-url": proxy.url}), 3.0)
    assert isinstance(found, ClusterRead), found
    assert any(line.startswith(f"GET http://{UNROUTABLE}/honest/api/v1/nodes") for line in proxy.seen), proxy.seen


def test_30_6_tls_server_name_is_the_name_sent_and_checked(named: tuple[HostileServer, bytes], tmp_path: Path) -> None:
    server, ca = named
    url = f"https://127.0.0.1:{server.tls_port}/tls-honest"
    mismatch = read_cluster("named", config(tmp_path / "plain.yaml", url, ca), 3.0)
    assert isinstance(mismatch, NotRead) and "could not be trusted" in mismatch.reason, mismatch
    found = read_cluster("named", config(tmp_path / "k.yaml", url, ca, **{"tls-server-name": NAME}), 3.0)
    assert isinstance(found, ClusterRead), found
    wrong = read_cluster("named", config(tmp_path / "w.yaml", url, ca, **{"tls-server-name": "other.internal"}), 3.0)
    assert isinstance(wrong, NotRead), wrong


def test_30_6_https_through_the_proxy_tunnel_with_tls_server_name(named: tuple[HostileServer, bytes],
                                                                  proxy: ForwardProxy, tmp_path: Path) -> None:
    _, ca = named
    path = config(tmp_path / "k.yaml", f"https://{UNROUTABLE}:6443/tls-honest", ca,
                  **{"proxy-url": proxy.url, "tls-server-name": NAME})
    found = read_cluster("tunnelled", path, 3.0)
    assert isinstance(found, ClusterRead), found
    assert proxy.seen and all(line == f"CONNECT {UNROUTABLE}:6443" for line in proxy.seen), proxy.seen


def test_30_6_environment_proxies_never_apply_to_loopback_servers(hostile: HostileFleet, proxy: ForwardProxy,
                                                                  tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.setenv(var, proxy.url)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    local = read_cluster("honest", config(tmp_path / "local.yaml", hostile.server.url("honest")), 3.0)
    assert isinstance(local, ClusterRead) and proxy.seen == [], proxy.seen       # Go never proxies loopback
    remote = read_cluster("proxied", config(tmp_path / "remote.yaml", f"http://{UNROUTABLE}/honest"), 3.0)
    assert isinstance(remote, ClusterRead), remote                               # a remote one: the environment's
    assert proxy.seen and proxy.seen[0].startswith(f"GET http://{UNROUTABLE}/"), proxy.seen
    monkeypatch.setenv("NO_PROXY", UNROUTABLE)
    seen = len(proxy.seen)
    direct = read_cluster("proxied", config(tmp_path / "remote.yaml", f"http://{UNROUTABLE}/honest"), 2.0)
    assert isinstance(direct, Unreachable) and len(proxy.seen) == seen, direct


def test_30_6_the_proxy_never_sees_the_token_in_an_error(hostile: HostileFleet, tmp_path: Path) -> None:
    path = config(tmp_path / "k.yaml", f"http://{UNROUTABLE}/honest",
                  **{"proxy-url": f"http://user:{TOKEN}@127.0.0.1:1"})
    found = read_cluster("proxied", path, 2.0)
    assert isinstance(found, Unreachable | NotRead), found
    assert_clean(found.reason)
    assert TOKEN not in repr(found)
