"""The secured data path through real Traefik on 127.0.0.1: HTTPS at the edge, API keys
checked by the callerauth plugin (gateway-plugins/, interpreted by Traefik), mutual TLS
between the hops. The mock engines record the headers they saw (--record-headers)."""
import ssl

import httpx
import pytest

from modelplane.commands.traffic import run_split
from modelplane.gateway.security import CallerLimits, hop_server_name
from modelplane.runtime.fleet import LocalSecurity

from .helpers import NS, SVC, replica, select

RECORD = ["--record-headers"]
KEY, OTHER = "sk-alice-0123456789abcdef", "sk-bob-fedcba9876543210"


def seen(fleet, name):
    return httpx.get(f"{fleet.engines[name].url}/debug/headers").json()["requests"]


def serve(fleet, *, callers=None, deployments=(("big", 90, "east"), ("small", 10, "west")), services=None):
    fleet.set_callers(callers if callers is not None else {"alice": KEY})
    eps = fleet.start_engines([replica(d, 0, c) for d, _, c in deployments],
                              faults={f"{d}-0": RECORD for d, _, _ in deployments})
    fleet.route(services or {SVC: [select(d, w) for d, w, _ in deployments]}, eps)
    return fleet.service_url(*SVC)


def client(fleet, key=None, **headers):
    if key:
        headers["Authorization"] = f"Bearer {key}"
    return httpx.Client(verify=ssl.create_default_context(cafile=fleet.edge_cert.cert), headers=headers, timeout=10)


def post(c, url):
    return c.post(f"{url}/v1/chat/completions", json={"messages": []})


def test_no_key_wrong_key_revoked_key_are_401_and_a_good_key_reaches_the_engine_as_its_caller(secure_fleet):
    url = serve(secure_fleet, deployments=(("big", 1, "east"),))
    with client(secure_fleet) as anon, client(secure_fleet, "sk-wrong") as wrong, \
            client(secure_fleet, KEY, **{"x-modelplane-caller": "root", "X_Modelplane_Caller": "root"}) as good:
        for c in (anon, wrong):
            r = post(c, url)
            assert r.status_code == 401
            assert r.json()["error"]["code"] in ("missing_api_key", "invalid_api_key")
            assert r.headers["www-authenticate"].startswith("Bearer")
        r = post(good, url)
        assert r.status_code == 200 and r.headers["x-served-by"] == "big-0"

        secure_fleet.set_callers({"bob": OTHER})       # alice's key revoked
        r = post(good, url)                            # the very next request
        assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_api_key"
    requests = seen(secure_fleet, "big-0")
    assert len(requests) == 1, "only the authenticated request reached the engine"
    # The keys are in the callers' files only: no log, no configuration file holds them.
    for path in secure_fleet.work_dir.rglob("*"):
        if path.is_file() and secure_fleet.keys_dir not in path.parents:
            text = path.read_text(errors="replace")
            assert KEY not in text and OTHER not in text, path
            assert "PRIVATE KEY" not in text or path.suffix == ".key", path
    assert "authorization" not in requests[0]["names"] and "x-api-key" not in requests[0]["names"]
    assert requests[0]["callers"] == ["alice"], "one caller header, ours, not the client's"


def test_x_api_key_is_accepted_and_removed(secure_fleet):
    url = serve(secure_fleet, deployments=(("big", 1, "east"),))
    with client(secure_fleet, **{"x-api-key": KEY}) as c:
        assert post(c, url).status_code == 200
    [request] = seen(secure_fleet, "big-0")
    assert request["callers"] == ["alice"] and "x-api-key" not in request["names"]


def test_a_caller_not_allowed_on_a_service_gets_403(make_fleet):
    fleet = make_fleet(security=LocalSecurity(allowed={SVC: ("alice",)}))
    url = serve(fleet, callers={"alice": KEY, "bob": OTHER}, deployments=(("big", 1, "east"),))
    with client(fleet, OTHER) as bob, client(fleet, KEY) as alice:
        r = post(bob, url)
        assert r.status_code == 403 and r.json()["error"]["code"] == "caller_not_allowed"
        assert "bob" in r.json()["error"]["message"] and OTHER not in r.text
        assert post(alice, url).status_code == 200
    assert [r["callers"] for r in seen(fleet, "big-0")] == [["alice"]]


def test_a_caller_over_its_rate_gets_429_with_retry_after_and_others_are_not_slowed(make_fleet):
    fleet = make_fleet(security=LocalSecurity(limits=CallerLimits(requests_per_minute=60, burst=3)))
    url = serve(fleet, callers={"alice": KEY, "bob": OTHER}, deployments=(("big", 1, "east"),))
    with client(fleet, KEY) as alice, client(fleet, OTHER) as bob:
        codes = [post(alice, url).status_code for _ in range(3)]
        over = post(alice, url)
        assert codes == [200, 200, 200]
        assert over.status_code == 429 and int(over.headers["retry-after"]) >= 1
        assert over.json()["error"]["code"] == "rate_limit_exceeded"
        assert post(bob, url).status_code == 200, "the limit is per caller"


def test_edge_refuses_plain_http_by_default_and_redirect_mode_only_redirects(secure_fleet, make_fleet):
    url = serve(secure_fleet, deployments=(("big", 1, "east"),))
    plain = url.replace("https://", "http://")
    r = httpx.post(f"{plain}/v1/chat/completions", json={}, headers={"Authorization": f"Bearer {KEY}"})
    assert r.status_code != 200
    assert seen(secure_fleet, "big-0") == []

    redirecting = make_fleet(security=LocalSecurity(plain_http="Redirect"))
    serve(redirecting, deployments=(("big", 1, "east"),))
    r = httpx.get(f"{redirecting.plain_url()}/{NS}/chat/v1/models")
    assert r.status_code in (301, 308) and r.headers["location"].startswith("https://")
    assert seen(redirecting, "big-0") == []


def _direct(fleet, cluster, cert=None, maximum=None):
    ctx = ssl.create_default_context(cafile=fleet.ca_file)
    if cert is not None:
        ctx.load_cert_chain(cert.cert, cert.key)
    if maximum is not None:
        ctx.maximum_version = maximum
    # Verified for the gateway's hop name, as the control plane does, whatever address it dials.
    gw = fleet.workload[cluster]
    transport = httpx.HTTPTransport(verify=ctx)
    with httpx.Client(transport=transport, timeout=5) as c:
        return c.post(f"https://127.0.0.1:{gw.port}/{NS}/chat/v1/chat/completions", json={},
                      extensions={"sni_hostname": hop_server_name(cluster)})


@pytest.mark.parametrize("maximum", [None, ssl.TLSVersion.TLSv1_2], ids=["tls1.3", "tls1.2"])
def test_a_workload_gateway_refuses_clients_without_a_certificate_from_the_hop_ca(secure_fleet, maximum):
    url = serve(secure_fleet, deployments=(("big", 1, "east"),))
    for cert in (None, secure_fleet.issue_client("intruder", other_ca=True)):
        with pytest.raises((httpx.ConnectError, httpx.ReadError, httpx.RemoteProtocolError)) as err:
            _direct(secure_fleet, "east", cert, maximum)
        assert "certificate" in str(err.value).lower() or "alert" in str(err.value).lower(), err.value
    r = httpx.post(f"http://127.0.0.1:{secure_fleet.workload['east'].port}/{NS}/chat/v1/chat/completions", json={})
    assert r.status_code != 200, "plain HTTP reaches no route"
    assert seen(secure_fleet, "big-0") == []
    # A certificate from the hop CA passes (what the control plane presents), and so does the hop itself.
    assert _direct(secure_fleet, "east", secure_fleet.issue_client("control-plane-2"), maximum).status_code == 200
    with client(secure_fleet, KEY) as c:
        assert post(c, url).status_code == 200
    assert len(seen(secure_fleet, "big-0")) == 2


# TLS 1.2 suites Go offers by default besides the AEAD ones (crypto/tls cipher_suites.go).
CBC_SHA = "ECDHE-RSA-AES128-SHA:ECDHE-RSA-AES256-SHA:ECDHE-ECDSA-AES128-SHA:ECDHE-ECDSA-AES256-SHA:AES128-SHA"


def _handshake(port, ca, ciphers, cert=None, server_name="localhost"):
    """The suite a TLS 1.2 handshake with `ciphers` settles on, or None when refused."""
    import socket

    ctx = ssl.create_default_context(cafile=ca)
    ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    ctx.set_ciphers(ciphers)
    if cert is not None:
        ctx.load_cert_chain(cert.cert, cert.key)
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as raw, \
                ctx.wrap_socket(raw, server_hostname=server_name) as tls:
            return tls.cipher()[0]
    except (ssl.SSLError, ConnectionResetError):
        return None


def test_30_low_tls_1_2_refuses_cbc_sha_suites_at_the_edge_and_between_the_hops(secure_fleet):
    """Traefik's TLS option cipherSuites (doc.traefik.io/reference/routing-configuration/http/tls/
    tls-options) as modelplane.gateway.security.tls_section writes it: a TLS 1.2 client offering only
    CBC-SHA suites is refused, one offering an AEAD suite gets it, at both hops."""
    url = serve(secure_fleet, deployments=(("big", 1, "east"),))
    edge = int(url.split("://", 1)[1].split("/", 1)[0].rsplit(":", 1)[1])
    ca = secure_fleet.edge_cert.cert
    assert _handshake(edge, ca, CBC_SHA) is None
    assert "GCM" in (_handshake(edge, ca, "ECDHE+AESGCM") or "")
    hop, client_cert = secure_fleet.workload["east"].port, secure_fleet.issue_client("control-plane-3")
    name = hop_server_name("east")
    assert _handshake(hop, secure_fleet.ca_file, CBC_SHA, client_cert, name) is None
    assert "GCM" in (_handshake(hop, secure_fleet.ca_file, "ECDHE+AESGCM", client_cert, name) or "")


def test_90_10_canary_is_still_exactly_180_20_with_everything_on(secure_fleet):
    url = serve(secure_fleet)
    res = run_split(url, 200, api_key=KEY, cafile=secure_fleet.edge_cert.cert)
    assert (res.failed, res.by_deployment) == (0, {"big": 180, "small": 20})
    assert {c for name in ("big-0", "small-0") for r in seen(secure_fleet, name) for c in r["callers"]} == {"alice"}
