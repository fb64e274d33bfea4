"""What secures the two hops, as Traefik configuration fragments (pure, plain dicts).

* Edge (control-plane gateway): HTTPS with the InferenceGateway's certificates; plain
  HTTP refused (no plain listener) or only redirected; callers authenticated by API key
  in the `callerauth` local plugin (gateway-plugins/, Go interpreted by Traefik), which
  stamps `x-modelplane-caller`, enforces a service's allowed callers and the per-caller
  limits.
* Between the hops: mutual TLS. Each workload gateway serves a certificate from the
  fleet's hop CA and accepts only clients presenting one from that CA; the control plane
  presents its client certificate and verifies each workload gateway's certificate
  against the CA for the name it was issued to (`serverName`), whatever address it dials.
* Egress to hand-written endpoints: the provider's certificate verified for its own
  host name, against roots named here, never `insecureSkipVerify`.

Every path here is a file inside the Traefik container (mounted Secrets) or the local
stack's directory: no certificate, key or API key is ever inlined into configuration.
"""
from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from modelplane.gateway.kvroute import kvroute_static
from modelplane.json_types import JsonObject

CALLER_HEADER = "x-modelplane-caller"
PLUGIN = "modelplane-callerauth"             # the plugin's name in Traefik's static configuration
PLUGIN_MODULE = "modelplane.local/callerauth"  # its Go module, under plugins-local/src/
# The Go sources of Traefik's local plugins, laid out as Traefik reads them:
# `plugins-local/src/<module>/` relative to its working directory.
PLUGINS_DIR = Path(__file__).resolve().parents[2] / "gateway-plugins"
PLAIN = "plain"                               # the entry point that only redirects to HTTPS
HOP_DOMAIN = "gateway.modelplane.internal"
TLS_MIN = "VersionTLS12"
# TLS 1.2 suites offered: ECDHE with an AEAD cipher only (no CBC-SHA, no static RSA); Go's names,
# as Traefik's TLS option `cipherSuites` takes them. TLS 1.3's suites are all AEAD and Go does not
# let them be configured, so this list is TLS 1.2's alone.
TLS12_CIPHER_SUITES = (
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384", "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256", "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
)

PlainHttp = Literal["Refuse", "Redirect"]
Config = JsonObject


@dataclass(frozen=True)
class CertFiles:
    cert: str
    key: str


@dataclass(frozen=True)
class CallerLimits:
    """Per caller, across every service of the gateway (0: no bound)."""

    requests_per_minute: int = 0
    burst: int = 0
    in_flight: int = 0


@dataclass(frozen=True)
class EdgeSecurity:
    """The control-plane gateway towards callers."""

    tls: CertFiles | None = None               # the default certificate
    more_certs: tuple[CertFiles, ...] = ()     # others, chosen by the name a client asks for (SNI)
    plain_http: PlainHttp = "Refuse"
    keys_dir: str | None = None                # caller authentication on when set
    limits: CallerLimits = CallerLimits()
    # (namespace, service) -> the callers it accepts; a service not named accepts every caller
    allowed: Mapping[tuple[str, str], tuple[str, ...]] = field(default_factory=dict)

    @property
    def auth(self) -> bool:
        return self.keys_dir is not None


@dataclass(frozen=True)
class HopTls:
    """Mutual TLS between the hops: the CA both sides trust and this side's certificate
    (the workload gateway's server certificate, or the control plane's client one).
    `server_names`: on the control plane, cluster -> the name its gateway's certificate
    carries (default `hop_server_name`)."""

    ca_file: str
    cert: CertFiles
    server_names: Mapping[str, str] = field(default_factory=dict)

    def server_name(self, cluster: str) -> str:
        return self.server_names.get(cluster) or hop_server_name(cluster)


def hop_server_name(cluster: str) -> str:
    """The name a workload gateway's certificate is issued to and the control plane verifies,
    stable whatever address (LoadBalancer IP, host name) the gateway ends up with."""
    return f"{cluster}.{HOP_DOMAIN}"


def _id(text: str) -> str:
    return re.sub(r"[^a-zA-Z0-9-]", "-", text)


def hop_url(url: str, hop: HopTls | None) -> str:
    """A workload gateway's URL with the scheme the hop uses: https exactly when mTLS is on."""
    if hop is None:
        return url
    return "https://" + url.split("://", 1)[1] if "://" in url else f"https://{url}"


def hop_transport_name(cluster: str) -> str:
    return f"hop-{_id(cluster)}"


def hop_transports(hop: HopTls, clusters: Sequence[str]) -> Config:
    """One serversTransport per workload cluster: its server name, the CA, our client cert."""
    return {hop_transport_name(c): {
        "serverName": hop.server_name(c),
        "rootCAs": [hop.ca_file],
        "certificates": [{"certFile": hop.cert.cert, "keyFile": hop.cert.key}],
        "insecureSkipVerify": False,
    } for c in clusters}


def egress_transport(name: str, host: str, roots: str | None) -> Config:
    """How the control plane dials a provider over HTTPS: its certificate verified for its
    own host name, against `roots` (a CA bundle file) when given."""
    cfg: Config = {"serverName": host, "insecureSkipVerify": False}
    if roots:
        cfg["rootCAs"] = [roots]
    return {name: cfg}


def tls_section(cert: CertFiles, client_ca: str | None = None, more: Sequence[CertFiles] = ()) -> Config:
    """The dynamic `tls` block: this gateway's certificate as the default one (`more` are
    picked by SNI), TLS 1.2 at least with AEAD suites only (TLS12_CIPHER_SUITES), and with
    `client_ca` a client certificate from that CA required on every TLS connection (the
    default options apply to routers matched by path, as all of ours are)."""
    options: Config = {"minVersion": TLS_MIN, "cipherSuites": list(TLS12_CIPHER_SUITES), "sniStrict": False}
    if client_ca is not None:
        options["clientAuth"] = {"caFiles": [client_ca], "clientAuthType": "RequireAndVerifyClientCert"}
    files = [{"certFile": c.cert, "keyFile": c.key} for c in (cert, *more)]
    return {"certificates": files, "stores": {"default": {"defaultCertificate": files[0]}},
            "options": {"default": options}}


def auth_middleware_name(namespace: str, service: str) -> str:
    return f"auth-{_id(namespace)}-{_id(service)}"


def auth_middleware(edge: EdgeSecurity, namespace: str, service: str) -> Config:
    """The callerauth plugin for one service's router."""
    assert edge.keys_dir is not None
    cfg: Config = {"keysDir": edge.keys_dir, "callerHeader": CALLER_HEADER, "service": f"{namespace}/{service}"}
    allowed = edge.allowed.get((namespace, service))
    if allowed:
        cfg["allowed"] = list(allowed)
    lim = edge.limits
    for key, value in (("requestsPerMinute", lim.requests_per_minute), ("burst", lim.burst),
                       ("inFlight", lim.in_flight)):
        if value:
            cfg[key] = value
    return {"plugin": {PLUGIN: cfg}}


def redirect_router() -> tuple[Config, Config]:
    """(routers, middlewares) answering every plain-HTTP request with a redirect to HTTPS."""
    return ({"to-https": {"entryPoints": [PLAIN], "rule": "PathPrefix(`/`)", "priority": 1,
                          "middlewares": ["to-https"], "service": "noop@internal"}},
            {"to-https": {"redirectScheme": {"scheme": "https", "permanent": True}}})


def plugin_static(*, callerauth: bool = True, kvroute: bool = False) -> Config:
    """The static `experimental` block that loads callerauth and/or kvroute (modelplane.gateway.
    kvroute) from ./plugins-local/src/."""
    plugins: Config = {PLUGIN: {"moduleName": PLUGIN_MODULE}} if callerauth else {}
    if kvroute:
        plugins.update(kvroute_static())
    return {"localPlugins": plugins}
