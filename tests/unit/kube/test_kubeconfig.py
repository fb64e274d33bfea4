"""Kubeconfigs through lightkube's models with our bounds (modelplane.kube.config): every
hostile value is an error naming the file and the field, read within bounds, and never quoted."""

from __future__ import annotations

import os
import ssl
import subprocess
import time
from pathlib import Path

import pytest

from modelplane.kube import ConfigError, load_kubeconfig
from modelplane.observe.health import assess
from modelplane.observe.read import NotRead, read_clusters
from modelplane.observe.verify import Verification

from .kubeconfigs import CA, SECRET, ca_data, document, plugin, write


def not_read(path: Path) -> str:
    """The reason a read of this kubeconfig gives, asserting it is NotRead (not an outage)."""
    found = read_clusters({"c": path}, timeout=3)["c"]
    assert isinstance(found, NotRead), found
    assert assess({}, {"c": found}, Verification(), None, now=1000.0) == {}     # no grace clock starts
    return found.reason


def test_19_1_a_token_with_a_newline_is_never_printed_or_stored(tmp_path: Path) -> None:
    """`token: |` gives "SECRET\\n": an error naming the field, never the header httpx refused."""
    path = write(tmp_path / "k", document(user={"token": SECRET + "\n"}))
    reason = not_read(path)
    assert "users['u'].user.token is not a token" in reason and str(path) in reason
    assert SECRET not in reason and "Bearer" not in reason


def test_19_1_a_multi_line_token_file_is_never_printed(tmp_path: Path) -> None:
    shadow = tmp_path / "shadow"
    shadow.write_text(f"root:$6${SECRET}:19000:0:99999:7:::\ndaemon:*:19000:0:99999:7:::\n")
    reason = not_read(write(tmp_path / "k", document(user={"tokenFile": str(shadow)})))
    assert "tokenFile" in reason and "not a token" in reason
    assert SECRET not in reason and "root:" not in reason


@pytest.mark.parametrize("value", ["false", "no", "0", "False", 0, 1])
def test_19_3_insecure_skip_tls_verify_must_be_a_boolean(tmp_path: Path, value: object) -> None:
    path = write(tmp_path / "k", document(server="https://127.0.0.1:9", cluster={"insecure-skip-tls-verify": value}))
    with pytest.raises(ConfigError) as err:
        load_kubeconfig(path)
    assert str(path) in str(err.value)
    assert "clusters[0] ('c').cluster.insecure-skip-tls-verify: Expected `bool`" in str(err.value)


@pytest.mark.parametrize(("field", "value", "where"), [
    ("server", 12, "clusters[0] ('c').cluster.server"),
    ("certificate-authority-data", ["a"], "clusters[0] ('c').cluster.certificate-authority-data"),
])
def test_19_3_a_field_of_the_wrong_type_names_file_and_field(tmp_path: Path, field: str, value: object,
                                                              where: str) -> None:
    doc = document()
    doc["clusters"][0]["cluster"][field] = value
    with pytest.raises(ConfigError) as err:
        load_kubeconfig(write(tmp_path / "k", doc))
    assert f"{where}: Expected" in str(err.value)


def test_19_5_a_token_file_that_is_a_device_or_a_fifo_is_refused_unread(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for token_file in ("/dev/zero", str(fifo)):
        start = time.monotonic()
        reason = not_read(write(tmp_path / "k", document(user={"tokenFile": token_file})))
        assert time.monotonic() - start < 3
        assert "is not a regular file" in reason, reason


def test_19_5_an_alias_bomb_is_refused_before_it_expands(tmp_path: Path) -> None:
    bomb = "\n".join(["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"] +
                     [f"a{i}: &a{i} [*a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, "
                      f"*a{i - 1}, *a{i - 1}, *a{i - 1}]" for i in range(1, 9)])
    text = (bomb + "\napiVersion: v1\nkind: Config\ncurrent-context: ctx\nclusters: [{name: c, cluster: {server: "
            "'http://127.0.0.1:9'}}]\ncontexts: [{name: ctx, context: {cluster: c, user: u}}]\n"
            "users: [{name: u, user: {exec: {apiVersion: client.authentication.k8s.io/v1beta1, command: x, "
            "args: *a8}}}]\n")
    start = time.monotonic()
    reason = not_read(write(tmp_path / "k", text))
    assert time.monotonic() - start < 3
    assert "aliases expand to more than" in reason


def test_19_5_a_sparse_kubeconfig_larger_than_the_bound_is_not_read(tmp_path: Path) -> None:
    path = tmp_path / "k"
    with open(path, "wb") as out:
        out.truncate(8 * 1024**3)                      # 8 GB, sparse: reading it would take minutes
    start = time.monotonic()
    reason = not_read(path)
    assert time.monotonic() - start < 3
    assert "is larger than" in reason


def test_19_15_an_encrypted_client_key_is_refused_without_a_prompt(tmp_path: Path) -> None:
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-keyout", "key.pem", "-out", "cert.pem",
                    "-days", "1", "-subj", "/CN=x", "-passout", "pass:hunter2"], cwd=tmp_path, check=True,
                   capture_output=True)
    path = write(tmp_path / "k", document(server="https://127.0.0.1:9", user={
        "client-certificate": "cert.pem", "client-key": "key.pem"}, cluster={"certificate-authority-data": ca_data(
            (tmp_path / "cert.pem").read_text())}))
    reason = not_read(path)
    assert "the client key is encrypted" in reason


def test_19_low_certificate_authority_data_that_is_not_base64_is_an_error(tmp_path: Path) -> None:
    path = write(tmp_path / "k", document(server="https://127.0.0.1:9", cluster={"certificate-authority-data": "%%%%"}))
    with pytest.raises(ConfigError, match="certificate-authority-data is not base64-encoded PEM"):
        load_kubeconfig(path)


def test_19_low_a_token_that_is_not_a_string_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"users\[0\] \('u'\).user.token: Expected `str \| null`, got `int`"):
        load_kubeconfig(write(tmp_path / "k", document(user={"token": 12345})))


def test_19_low_a_kubeconfig_that_is_not_utf8_is_named_as_such(tmp_path: Path) -> None:
    path = tmp_path / "k"
    path.write_bytes(b"apiVersion: v1\nkind: \xff\xfe\n")
    with pytest.raises(ConfigError, match=r"is not UTF-8 text \(byte 0xff on line 2\)"):
        load_kubeconfig(path)


def test_19_low_plain_http_clusters_build_no_ssl_context(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Loading the system trust store per cluster cost 300 refusing http clusters 11.5 s: an
    http:// server gets no context at all (benchmarks/observe_hostile.py times 300 of them)."""
    def refuse(*args: object, **kwargs: object) -> ssl.SSLContext:
        raise AssertionError("an SSL context was built for an http:// server")
    monkeypatch.setattr(ssl, "create_default_context", refuse)
    monkeypatch.setattr(ssl.SSLContext, "load_verify_locations", refuse)
    import modelplane.kube.tls as tls
    tls.unused_context.cache_clear()
    found = read_clusters({f"c{i}": write(tmp_path / f"k{i}", document()) for i in range(20)}, timeout=2)
    assert {type(r).__name__ for r in found.values()} == {"Unreachable"}


def test_the_ca_and_client_certificate_are_checked_pem(tmp_path: Path) -> None:
    access = load_kubeconfig(write(tmp_path / "k", document(cluster={"certificate-authority-data": ca_data()})))
    assert access.ca_pem == CA and SECRET not in repr(access)
    with pytest.raises(ConfigError, match="decodes to something that is not PEM"):
        load_kubeconfig(write(tmp_path / "k", document(cluster={"certificate-authority-data": ca_data("hello")})))
    with pytest.raises(ConfigError, match="needs its key"):
        load_kubeconfig(write(tmp_path / "k", document(user={"client-certificate-data": ca_data()})))


def test_the_server_must_not_carry_credentials(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        load_kubeconfig(write(tmp_path / "k", document(server=f"https://admin:{SECRET}@127.0.0.1:9")))
    assert "carries credentials in its URL" in str(err.value) and SECRET not in str(err.value)


def test_exec_plugins_need_a_known_api_version(tmp_path: Path) -> None:
    doc = document(user=plugin("-c", "print(1)"))
    doc["users"][0]["user"]["exec"]["apiVersion"] = "client.authentication.k8s.io/v9"
    with pytest.raises(ConfigError, match="apiVersion of the credential plugin"):
        load_kubeconfig(write(tmp_path / "k", doc))
