"""Contract tests for the kubeconfig rules of the fourth hardening round (issue 30 items 4-6 and
the insecure-with-a-CA item), each named after the client-go rule it follows. Sources read
(kubernetes/client-go, brought with `fetch`, commit 32ce75a7d6bc6960fd048d3d1e3b34185418d8c8):

* tools/clientcmd/validation.go `validateClusterInfo`: "no server found for cluster %q";
  `parseProxyURL` (tools/clientcmd/helpers.go): proxy-url schemes http, https, socks5;
* tools/clientcmd/client_config.go `ClientConfig`: `clientConfig.Proxy = http.ProxyURL(u)` for a
  cluster's proxy-url; `getServerIdentificationPartialConfig`: `ServerName = TLSServerName`;
* transport/transport.go `TLSConfigFor`: "specifying a root certificates file with the insecure
  flag is not allowed"; transport/cache.go: `http.ProxyFromEnvironment` otherwise;
* golang/net http/httpproxy/proxy.go `useProxy`: never a proxy for "localhost" or a loopback IP;
  NO_PROXY entries `*`, IP, CIDR, domain (and subdomains), optional port; `FromEnvironment`:
  HTTP_PROXY / http_proxy, HTTPS_PROXY / https_proxy, NO_PROXY / no_proxy, REQUEST_METHOD (CGI);
* plugin/pkg/client/auth/exec/exec.go `refreshCredsLocked`: `cred.Spec.Cluster = a.cluster` when
  provideClusterInfo; rest/exec.go `ConfigToExecCluster` and pkg/apis/clientauthentication/v1
  types.go `Cluster` (server, tls-server-name, insecure-skip-tls-verify,
  certificate-authority-data, proxy-url, disable-compression, config from the
  `client.authentication.k8s.io/exec` extension); `isInteractive`: interactiveMode Always
  without a terminal is an error.
"""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path

import pytest
import yaml

from modelplane.kube import ConfigError, KubeClient, load_kubeconfig
from modelplane.kube.proxy import environment_proxy
from tests.unit.kube.kubeconfigs import CA, EXEC_API, SECRET, ca_data, document, write


def test_30_4_no_server_found_for_cluster_is_a_config_error_not_localhost(tmp_path: Path) -> None:
    doc = document()
    del doc["clusters"][0]["cluster"]["server"]
    with pytest.raises(ConfigError, match=r"cluster 'c' has no server \(clusters\[\]\.cluster\.server\)") as exc:
        load_kubeconfig(write(tmp_path / "k.yaml", doc))
    assert SECRET not in str(exc.value)
    doc["clusters"][0]["cluster"]["server"] = ""
    with pytest.raises(ConfigError, match="has no server"):
        load_kubeconfig(write(tmp_path / "k.yaml", doc))


@pytest.mark.parametrize("server, words", [
    ("http://127.0.0.1:70000", "invalid port (70000"),
    ("https://127.0.0.1:65536/x", "invalid port (65536"),
    ("http://127.0.0.1:0", "invalid port (0"),
    ("https://:6443", "has no host"),
    ("ftp://127.0.0.1", "is not an http(s) URL"),
    ("https://a_b!:1", "invalid host name"),
    ("https://127.0.0.1:6443/?watch=1", "query or fragment"),
    ("https://127.0.0.1:6443#x", "query or fragment"),
])
def test_30_5_the_server_url_is_validated_before_any_request(tmp_path: Path, server: str, words: str) -> None:
    with pytest.raises(ConfigError, match="kubeconfig") as exc:
        load_kubeconfig(write(tmp_path / "k.yaml", document(server)))
    assert words in str(exc.value), exc.value
    with pytest.raises(ConfigError):
        KubeClient(server, SECRET)              # the client checks it too (a Prometheus url, the sim)


def test_30_5_a_server_with_a_path_and_an_ipv6_host_is_fine(tmp_path: Path) -> None:
    for server in ("https://[::1]:6443/k8s/clusters/c-1", "http://127.0.0.1:8001/base"):
        assert load_kubeconfig(write(tmp_path / "k.yaml", document(server))).server == server


def test_30_6_proxy_url_and_tls_server_name_are_honoured_not_dropped(tmp_path: Path) -> None:
    doc = document("https://10.0.0.1:6443", cluster={"proxy-url": "http://proxy.internal:3128",
                                                       "tls-server-name": "kubernetes.default",
                                                       "certificate-authority-data": ca_data()})
    access = load_kubeconfig(write(tmp_path / "k.yaml", doc))
    assert (access.proxy, access.tls_server_name) == ("http://proxy.internal:3128", "kubernetes.default")


@pytest.mark.parametrize("proxy, words", [
    ("socks5://127.0.0.1:1080", "socks5 proxy"),
    ("ftp://p:21", "http or https URL"),
    ("http://p:99999", "invalid port"),
])
def test_30_6_a_proxy_url_this_client_cannot_use_is_refused_naming_the_field(tmp_path: Path, proxy: str,
                                                                             words: str) -> None:
    doc = document(cluster={"proxy-url": proxy})
    with pytest.raises(ConfigError, match=r"clusters\['c'\]\.cluster\.proxy-url") as exc:
        load_kubeconfig(write(tmp_path / "k.yaml", doc))
    assert words in str(exc.value)


def test_30_6_a_tls_server_name_that_is_not_a_host_name_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"tls-server-name is not a host name"):
        load_kubeconfig(write(tmp_path / "k.yaml", document(cluster={"tls-server-name": "a b/c"})))


@pytest.mark.parametrize("server, env, expected", [
    ("https://10.0.0.1:6443", {"HTTPS_PROXY": "http://p:3128"}, "http://p:3128"),
    ("https://10.0.0.1:6443", {"https_proxy": "p:3128"}, "http://p:3128"),       # no scheme: http
    ("https://10.0.0.1:6443", {"HTTP_PROXY": "http://p:3128"}, None),            # the https one only
    ("http://10.0.0.1:8080", {"HTTP_PROXY": "http://p:3128"}, "http://p:3128"),
    ("http://10.0.0.1:8080", {"HTTP_PROXY": "http://p:3128", "REQUEST_METHOD": "GET"}, None),   # CGI
    ("https://127.0.0.1:6443", {"HTTPS_PROXY": "http://p:3128"}, None),           # loopback: never
    ("https://127.5.0.9:6443", {"HTTPS_PROXY": "http://p:3128"}, None),
    ("https://[::1]:6443", {"HTTPS_PROXY": "http://p:3128"}, None),
    ("https://localhost:6443", {"HTTPS_PROXY": "http://p:3128"}, None),
    ("https://10.0.0.1:6443", {"HTTPS_PROXY": "http://p:3128", "NO_PROXY": "10.0.0.0/8"}, None),
    ("https://10.0.0.1:6443", {"HTTPS_PROXY": "http://p:3128", "no_proxy": "10.0.0.1:6443"}, None),
    ("https://10.0.0.1:6443", {"HTTPS_PROXY": "http://p:3128", "NO_PROXY": "10.0.0.1:443"}, "http://p:3128"),
    ("https://api.eu.example.com", {"HTTPS_PROXY": "http://p:3128", "NO_PROXY": "example.com"}, None),
    ("https://example.com", {"HTTPS_PROXY": "http://p:3128", "NO_PROXY": ".example.com"}, "http://p:3128"),
    ("https://notexample.com", {"HTTPS_PROXY": "http://p:3128", "NO_PROXY": "example.com"}, "http://p:3128"),
    ("https://a.example.com", {"HTTPS_PROXY": "http://p:3128", "NO_PROXY": "*.example.com"}, None),
    ("https://a.example.com", {"HTTPS_PROXY": "http://p:3128", "NO_PROXY": "*"}, None),
])
def test_30_6_environment_proxies_follow_go_proxy_from_environment(server: str, env: dict[str, str],
                                                                   expected: str | None) -> None:
    found = environment_proxy(server, env)
    assert (found[1] if found else None) == expected


def test_30_6_provide_cluster_info_passes_the_cluster_to_the_plugin(tmp_path: Path) -> None:
    seen = tmp_path / "exec-info.json"
    script = (f"import os, json; open({str(seen)!r}, 'w').write(os.environ['KUBERNETES_EXEC_INFO']); "
              f"print(json.dumps({{'status': {{'token': {SECRET!r}}}}}))")
    doc = document("https://10.0.0.1:6443", user={"exec": {
        "apiVersion": EXEC_API, "command": sys.executable, "args": ["-c", script], "provideClusterInfo": True}},
        cluster={"certificate-authority-data": ca_data(), "tls-server-name": "kubernetes.default",
                 "proxy-url": "http://proxy.internal:3128",
                 "extensions": [{"name": "client.authentication.k8s.io/exec", "extension": {"audience": "a1"}},
                                {"name": "other", "extension": {"x": 1}}]})
    access = load_kubeconfig(write(tmp_path / "k.yaml", doc), timeout=10)
    assert access.token == SECRET
    cluster = json.loads(seen.read_text())["spec"]["cluster"]
    assert cluster == {"server": "https://10.0.0.1:6443", "tls-server-name": "kubernetes.default",
                       "certificate-authority-data": base64.b64encode(CA.encode()).decode(),
                       "proxy-url": "http://proxy.internal:3128", "config": {"audience": "a1"}}
    doc["users"][0]["user"]["exec"]["provideClusterInfo"] = False
    load_kubeconfig(write(tmp_path / "k.yaml", doc), timeout=10)
    assert "cluster" not in json.loads(seen.read_text())["spec"]


@pytest.mark.parametrize("field, value", [("as", "admin"), ("as-groups", ["system:masters"]), ("as-uid", "1")])
def test_30_6_impersonation_is_refused_naming_the_field_not_dropped(tmp_path: Path, field: str, value: object) -> None:
    doc = document(user={"token": SECRET, field: value})
    with pytest.raises(ConfigError, match=rf"\.{field} \(impersonation\) is not supported"):
        load_kubeconfig(write(tmp_path / "k.yaml", doc))


def test_30_6_an_exec_plugin_that_must_prompt_is_refused(tmp_path: Path) -> None:
    doc = document(user={"exec": {"apiVersion": EXEC_API, "command": "/bin/true", "interactiveMode": "Always"}})
    with pytest.raises(ConfigError, match="interactiveMode is Always"):
        load_kubeconfig(write(tmp_path / "k.yaml", doc))
    doc["users"][0]["user"]["exec"]["interactiveMode"] = "Sometimes"
    with pytest.raises(ConfigError, match="must be one of Never, IfAvailable, Always"):
        load_kubeconfig(write(tmp_path / "k.yaml", doc))


def test_30_low_specifying_a_root_certificates_file_with_the_insecure_flag_is_not_allowed(tmp_path: Path) -> None:
    doc = document("https://10.0.0.1:6443", cluster={"insecure-skip-tls-verify": True,
                                                       "certificate-authority-data": ca_data()})
    with pytest.raises(ConfigError, match="both insecure-skip-tls-verify: true and a certificate-authority"):
        load_kubeconfig(write(tmp_path / "k.yaml", doc))
    del doc["clusters"][0]["cluster"]["certificate-authority-data"]
    assert load_kubeconfig(write(tmp_path / "k.yaml", doc)).insecure is True      # alone, as kubectl takes it


def test_30_low_redaction_keeps_our_own_error_text_and_masks_a_block_scalar_token(tmp_path: Path) -> None:
    """The refusal of a `token: |` block went through outside_text as "token: REDACTED block":
    our words stay, the token itself never shows, and a block scalar's indented value is masked."""
    from modelplane.observe.read import NotRead, read_cluster
    from modelplane.redact import outside_text

    path = write(tmp_path / "k.yaml", yaml_text_with_block_token())
    found = read_cluster("c", path, timeout=1.0)
    assert isinstance(found, NotRead), found
    assert "a YAML block scalar, `token: |`, adds a newline" in found.reason, found.reason
    assert "REDACTED" not in found.reason and SECRET not in found.reason
    assert outside_text(f"user:\n  token: |\n    {SECRET}\n") == "user: token: REDACTED"
    assert outside_text(f"token: >-\n  {SECRET}") == "token: REDACTED"


def yaml_text_with_block_token() -> str:
    text = yaml.safe_dump(document(user={"token": "PLACEHOLDER"}))
    return text.replace("token: PLACEHOLDER", f"token: |\n      {SECRET}")
