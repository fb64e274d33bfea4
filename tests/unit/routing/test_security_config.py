"""What the secured hops are made of (pure dicts; tests/integration runs them in Traefik)."""
import datetime

import pytest
import yaml
from cryptography import x509

from modelplane.gateway import pki
from modelplane.gateway.config import control_plane_config, static_config, workload_config
from modelplane.gateway.security import (
    PLUGIN,
    PLUGIN_MODULE,
    CallerLimits,
    CertFiles,
    EdgeSecurity,
    HopTls,
    hop_server_name,
    hop_url,
)
from modelplane.routing import RouteEntry, compute_weights, replica_endpoint

from .test_gateway_config import NS, rep, route

EDGE = EdgeSecurity(tls=CertFiles("/tls/edge.crt", "/tls/edge.key"), keys_dir="/callers",
                    limits=CallerLimits(requests_per_minute=600, in_flight=4), allowed={(NS, "chat"): ("alice",)})
CLIENT = HopTls("/hop/ca.crt", CertFiles("/hop/client.crt", "/hop/client.key"), {"west": "gw.west.example"})
SERVER = HopTls("/hop/ca.crt", CertFiles("/hop/server.crt", "/hop/server.key"))


def two_clusters():
    eps = [rep("a-0", "a", "east"), rep("b-0", "b", "west")]
    return route([RouteEntry("a", 1, {"modelplane.ai/deployment": "a"}),
                  RouteEntry("b", 1, {"modelplane.ai/deployment": "b"})], eps)


def test_control_plane_authenticates_first_serves_https_and_dials_each_cluster_with_its_transport():
    cp = control_plane_config([two_clusters()], {"east": "http://e:80", "west": "w:443"}, edge=EDGE, hop=CLIENT)
    http = cp["http"]
    router = http["routers"]["cp-ml-team-chat"]
    assert router["middlewares"] == ["auth-ml-team-chat", "retry"] and router["tls"] == {}
    plugin = http["middlewares"]["auth-ml-team-chat"]["plugin"][PLUGIN]
    assert plugin == {"keysDir": "/callers", "callerHeader": "x-modelplane-caller", "service": "ml-team/chat",
                      "allowed": ["alice"], "requestsPerMinute": 600, "inFlight": 4}
    east = http["services"]["cp-ml-team-chat-p0-c-east"]["loadBalancer"]
    assert east["servers"] == [{"url": "https://e:80"}] and east["serversTransport"] == "hop-east"
    assert http["serversTransports"]["hop-east"] == {
        "serverName": hop_server_name("east"), "rootCAs": ["/hop/ca.crt"], "insecureSkipVerify": False,
        "certificates": [{"certFile": "/hop/client.crt", "keyFile": "/hop/client.key"}]}
    assert http["serversTransports"]["hop-west"]["serverName"] == "gw.west.example"
    assert cp["tls"]["stores"]["default"]["defaultCertificate"] == {"certFile": "/tls/edge.crt",
                                                                    "keyFile": "/tls/edge.key"}
    assert "clientAuth" not in cp["tls"]["options"]["default"], "callers present API keys, not certificates"
    assert "http" not in yaml.safe_dump(http["services"]).replace("https", ""), "no plain hop left"


def test_without_security_the_configuration_is_what_it_was():
    cp = control_plane_config([two_clusters()], {"east": "http://e", "west": "http://w"})
    assert "tls" not in cp and "serversTransports" not in cp["http"]
    assert cp["http"]["routers"]["cp-ml-team-chat"]["middlewares"] == ["retry"]


def test_redirect_mode_adds_a_plain_router_that_only_redirects():
    edge = EdgeSecurity(tls=EDGE.tls, plain_http="Redirect")
    http = control_plane_config([two_clusters()], {"east": "e", "west": "w"}, edge=edge)["http"]
    assert http["routers"]["to-https"]["entryPoints"] == ["plain"]
    assert http["routers"]["to-https"]["service"] == "noop@internal"
    assert http["middlewares"]["to-https"] == {"redirectScheme": {"scheme": "https", "permanent": True}}
    refuse = control_plane_config([two_clusters()], {"east": "e", "west": "w"}, edge=EdgeSecurity(tls=EDGE.tls))
    assert "to-https" not in refuse["http"]["routers"]


def test_workload_gateway_serves_only_tls_and_requires_a_client_certificate_from_the_hop_ca():
    wl = workload_config("east", [two_clusters()], hop=SERVER)
    assert wl["http"]["routers"] and all(r["tls"] == {} for r in wl["http"]["routers"].values())
    options = wl["tls"]["options"]["default"]
    assert options["clientAuth"] == {"caFiles": ["/hop/ca.crt"], "clientAuthType": "RequireAndVerifyClientCert"}
    assert options["minVersion"] == "VersionTLS12"


def test_static_config_loads_the_plugin_only_when_asked_and_never_skips_verification():
    plain = static_config(":8000", "/d")
    assert "experimental" not in plain and plain["serversTransport"] == {"insecureSkipVerify": False}
    with_plugin = static_config(":8000", "/d", plugins=True, plain_address=":8080")
    assert with_plugin["experimental"] == {"localPlugins": {PLUGIN: {"moduleName": PLUGIN_MODULE}}}
    assert with_plugin["entryPoints"]["plain"] == {"address": ":8080"}


@pytest.mark.parametrize(("url", "hop", "expected"), [
    ("http://e:80", CLIENT, "https://e:80"), ("e:443", CLIENT, "https://e:443"), ("http://e", None, "http://e")])
def test_hop_url_takes_the_scheme_of_the_hop(url, hop, expected):
    assert hop_url(url, hop) == expected


def test_certificates_chain_to_the_ca_with_the_right_usage_and_names():
    ca = pki.new_ca("test CA")
    server = pki.issue(ca, "east", "server", [hop_server_name("east"), "10.0.0.1"])
    client = pki.issue(ca, "control-plane", "client")
    ca_cert = x509.load_pem_x509_certificate(ca.cert_pem.encode())
    for pair in (server, client):
        cert = x509.load_pem_x509_certificate(pair.cert_pem.encode())
        cert.verify_directly_issued_by(ca_cert)
        assert cert.not_valid_after_utc - cert.not_valid_before_utc <= datetime.timedelta(days=pki.LEAF_DAYS)
    assert pki.sans_of(server.cert_pem) == [hop_server_name("east"), "10.0.0.1"]
    usage = x509.load_pem_x509_certificate(client.cert_pem.encode()).extensions.get_extension_for_class(
        x509.ExtendedKeyUsage).value
    assert list(usage) == [x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH]
    assert ca_cert.extensions.get_extension_for_class(x509.BasicConstraints).value.path_length == 0


def test_a_key_pair_never_shows_its_private_key():
    pair = pki.self_signed(["localhost"])
    assert "PRIVATE" not in repr(pair) and "PRIVATE" not in str(pair) and "PRIVATE" in pair.key_pem
    assert "self-signed" in pki.subject_of(pair.cert_pem)


def test_a_ca_key_that_is_not_ours_is_a_clear_error():
    other = pki.KeyPair(pki.new_ca().cert_pem, "-----BEGIN PRIVATE KEY-----\nnope\n-----END PRIVATE KEY-----\n")
    with pytest.raises(ValueError):
        pki.issue(other, "x", "server")


def test_replica_endpoints_are_unchanged_by_security():
    ep = replica_endpoint(NS, "a-0", "a", "east", 0, url="http://a-0.ml-team.svc:8000")
    backend = compute_weights([RouteEntry("a", 1, {"modelplane.ai/deployment": "a"})], [ep], namespace=NS)[0]
    wl = workload_config("east", [route([RouteEntry("a", 1, {"modelplane.ai/deployment": "a"})], [ep])], hop=SERVER)
    assert backend.endpoint.url.startswith("http://")
    assert wl["http"]["services"]["replica-ml-team-a-0"]["loadBalancer"]["servers"] == [{"url": ep.url}], \
        "the last hop (gateway to engine, inside the cluster) stays plain"
