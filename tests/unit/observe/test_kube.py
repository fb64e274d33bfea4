"""The core Kubernetes client (modelplane.kube): kubeconfigs, and reads bounded in time."""

from __future__ import annotations

import base64
import json
import socket
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from modelplane.kube import KubeError, load_kubeconfig
from modelplane.observe.read import ClusterRead, NotRead, Unreachable, kubeconfigs_in, read_clusters

TOKEN = "s3cr3t-t0ken-value"
EXEC_V1BETA1 = "client.authentication.k8s.io/v1beta1"
CA = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


def kubeconfig(path: Path, server: str = "https://127.0.0.1:6443", user: dict[str, Any] | None = None,
               cluster: dict[str, Any] | None = None, current: str = "ctx") -> Path:
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": current,
        "clusters": [{"name": "c", "cluster": cluster or {
            "server": server, "certificate-authority-data": base64.b64encode(CA.encode()).decode()}}],
        "users": [{"name": "u", "user": user if user is not None else {"token": TOKEN}}],
        "contexts": [{"name": "ctx", "context": {"cluster": "c", "user": "u"}},
                     {"name": "other", "context": {"cluster": "c", "user": "u"}}]}))
    return path


def test_token_and_embedded_ca(tmp_path: Path) -> None:
    access = load_kubeconfig(kubeconfig(tmp_path / "k"))
    assert (access.server, access.token, access.ca_pem) == ("https://127.0.0.1:6443", TOKEN, CA)
    assert TOKEN not in repr(access)


def test_token_file_ca_file_and_client_certificate_relative_to_the_kubeconfig(tmp_path: Path) -> None:
    (tmp_path / "token").write_text(TOKEN + "\n")
    (tmp_path / "ca.crt").write_text(CA)
    cert, key = "-----BEGIN CERTIFICATE-----\nCERT\n", "-----BEGIN PRIVATE KEY-----\nKEY\n"
    (tmp_path / "c.crt").write_text(cert)
    access = load_kubeconfig(kubeconfig(
        tmp_path / "k", user={"tokenFile": "token", "client-certificate": "c.crt",
                              "client-key-data": base64.b64encode(key.encode()).decode()},
        cluster={"server": "https://x", "certificate-authority": "ca.crt"}))
    assert (access.token, access.ca_pem, access.cert_pem, access.key_pem) == (TOKEN, CA, cert, key)


def test_exec_credential_plugin(tmp_path: Path) -> None:
    plugin = tmp_path / "plugin.py"
    plugin.write_text("import json, os; print(json.dumps({'kind': 'ExecCredential', "
                      "'status': {'token': os.environ['MY_TOKEN']}}))")
    user = {"exec": {"apiVersion": "client.authentication.k8s.io/v1beta1", "command": sys.executable,
                     "args": [str(plugin)], "env": [{"name": "MY_TOKEN", "value": TOKEN}]}}
    assert load_kubeconfig(kubeconfig(tmp_path / "k", user=user)).token == TOKEN


@pytest.mark.parametrize(("case", "user", "current", "message"), [
    ("a failing plugin", {"exec": {"apiVersion": EXEC_V1BETA1, "command": sys.executable,
                                   "args": ["-c", f"print('{TOKEN}'); exit(3)"]}}, "ctx", "exited 3"),
    ("a plugin printing no credential", {"exec": {"apiVersion": EXEC_V1BETA1, "command": sys.executable,
                                                  "args": ["-c", f"print('{TOKEN}')"]}},
     "ctx", "printed no ExecCredential status.token"),
    ("a missing context", {"token": TOKEN}, "nope", "no context named 'nope'"),
])
def test_unusable_kubeconfigs_are_named_without_their_secrets(tmp_path: Path, case: str, user: dict[str, Any],
                                                              current: str, message: str) -> None:
    path = kubeconfig(tmp_path / "k", user=user, current=current)
    with pytest.raises(KubeError) as err:
        load_kubeconfig(path)
    assert message in str(err.value) and str(path) in str(err.value), case
    assert TOKEN not in str(err.value)


def test_a_named_context_and_a_missing_file(tmp_path: Path) -> None:
    assert load_kubeconfig(kubeconfig(tmp_path / "k"), context="other").token == TOKEN
    with pytest.raises(KubeError, match="cannot read kubeconfig"):
        load_kubeconfig(tmp_path / "missing")


@pytest.fixture
def silent_server() -> Iterator[int]:
    """A TCP port that accepts connections and never answers: a stalled API server."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.1)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join()
    for s in held:
        s.close()
    server.close()


def closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port: int = s.getsockname()[1]
    s.close()
    return port


def test_reads_are_bounded_per_cluster_and_concurrent(tmp_path: Path, silent_server: int) -> None:
    """Two stalled API servers and a refused port: every cluster answers within about the bound
    (not the sum of the bounds), stalled ones as unreachable; a bad kubeconfig is not read."""
    configs = {name: kubeconfig(tmp_path / f"{name}.yaml", user={}, cluster={"server": f"http://127.0.0.1:{port}"})
               for name, port in (("slow1", silent_server), ("slow2", silent_server), ("gone", closed_port()))}
    configs["broken"] = tmp_path / "nope.yaml"
    configs["bad-ca"] = kubeconfig(tmp_path / "bad-ca.yaml")     # the CA is not a certificate
    start = time.monotonic()
    found = read_clusters(configs, timeout=1.0)
    took = time.monotonic() - start
    assert took < 2.5, took
    assert {n: type(r).__name__ for n, r in found.items()} == {
        "bad-ca": "NotRead", "broken": "NotRead", "gone": "Unreachable", "slow1": "Unreachable",
        "slow2": "Unreachable"}
    assert isinstance(found["bad-ca"], NotRead) and "certificate authority" in found["bad-ca"].reason
    assert isinstance(found["broken"], NotRead) and "cannot read kubeconfig" in found["broken"].reason
    assert isinstance(found["gone"], Unreachable) and "did not answer" in found["gone"].reason


def test_kubeconfigs_in_a_directory(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "kubeconfig").write_text("x")
    (tmp_path / "b.yaml").write_text("x")
    assert kubeconfigs_in(tmp_path, ["a", "b", "c"]) == {"a": tmp_path / "a" / "kubeconfig", "b": tmp_path / "b.yaml"}
    with pytest.raises(ValueError, match="not a directory"):
        kubeconfigs_in(tmp_path / "b.yaml", ["a"])


def test_a_cluster_read_lists_every_page(tmp_path: Path) -> None:
    """Lists follow the API server's `continue` tokens (a tiny HTTP server serving pages)."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    from urllib.parse import parse_qs, urlsplit

    class Pages(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
            query = parse_qs(urlsplit(self.path).query)
            token = query.get("continue", [""])[0]
            body: dict[str, Any] = {"items": [{"metadata": {"name": f"n{token or 0}"}}], "metadata": {}}
            if urlsplit(self.path).path == "/api/v1/nodes" and not token:
                body["metadata"]["continue"] = "1"
            data = json.dumps(body).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Pages)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        path = kubeconfig(tmp_path / "k", user={}, cluster={"server": f"http://127.0.0.1:{httpd.server_address[1]}"})
        found = read_clusters({"a": path}, timeout=5)["a"]
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert isinstance(found, ClusterRead)
    assert [n["metadata"]["name"] for n in found.nodes] == ["n0", "n1"]
