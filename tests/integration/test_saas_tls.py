"""SaaS egress over HTTPS: the control plane verifies the provider's certificate for the
provider's host name against the roots it is given, never skipping verification. The
provider is a mock engine behind a TLS-terminating Traefik with a certificate from a CA of
its own."""
import secrets

import pytest

from modelplane.commands.traffic import run_split
from modelplane.gateway import pki
from modelplane.routing import Credential, Endpoint, RouteEntry
from modelplane.runtime.fleet import write_pair, write_private
from modelplane.runtime.process import Traefik

from .helpers import NS, SVC, replica, select, wait_only

PROVIDER_LABEL = {"modelplane.ai/provider": "tls-provider"}


def _provider(fleet, ca: pki.KeyPair) -> tuple[str, str]:
    """(https URL of the provider, its API key)."""
    key = secrets.token_urlsafe(24)
    engine = fleet.start_engine("provider-api", extra=["--api-key-env", "PROVIDER_KEY"], env={"PROVIDER_KEY": key})
    files = write_pair(fleet.work_dir, "provider", pki.issue(ca, "provider", "server", ["127.0.0.1"]))
    front = Traefik("provider-tls", fleet.work_dir, group=fleet.group)
    fleet._procs.append(front)
    front.wait_ready()
    front.apply({
        "http": {"routers": {"p": {"entryPoints": ["web"], "rule": "PathPrefix(`/`)", "service": "p", "tls": {}}},
                 "services": {"p": {"loadBalancer": {"servers": [{"url": engine.url}]}}}},
        "tls": {"stores": {"default": {"defaultCertificate": {"certFile": files.cert, "keyFile": files.key}}}}})
    return front.url.replace("http://", "https://"), key


def _route(fleet, url: str, key: str) -> None:
    fleet.secrets[(NS, "provider-key", "apiKey")] = key
    saas = Endpoint(NS, "provider", PROVIDER_LABEL, url=url, external=True, credential=Credential("provider-key"))
    eps = fleet.start_engines([replica("qwen", 0, "east")]) + [saas]
    fleet.route({SVC: [select("qwen", 3), RouteEntry("overflow", 1, PROVIDER_LABEL)]}, eps)


def test_a_provider_whose_certificate_verifies_takes_its_share(make_fleet, tmp_path):
    ca = pki.new_ca("provider CA")
    roots = tmp_path / "roots.pem"
    write_private(roots, ca.cert_pem)
    fleet = make_fleet(egress_roots=str(roots))
    _route(fleet, *_provider(fleet, ca))
    res = run_split(fleet.service_url(*SVC), 200)
    assert (res.failed, res.by_replica) == (0, {"qwen-0": 150, "provider-api": 50}), res.errors


@pytest.mark.parametrize("roots", ["another CA", "the system's roots"])
def test_a_provider_whose_certificate_does_not_verify_gets_no_request(make_fleet, tmp_path, roots):
    other = tmp_path / "other.pem"
    write_private(other, pki.new_ca("not the provider's CA").cert_pem)
    # Traefik logs each refused handshake (500 until the health check takes the provider out)
    fleet = make_fleet(egress_roots=str(other) if roots == "another CA" else None,
                       expect_errors=("tls: failed to verify certificate",))
    _route(fleet, *_provider(fleet, pki.new_ca("provider CA")))
    wait_only(fleet.service_url(*SVC), "qwen-0")
    res = run_split(fleet.service_url(*SVC), 100)
    assert (res.failed, res.by_replica) == (0, {"qwen-0": 100})
    assert fleet.engines["provider-api"].alive()
