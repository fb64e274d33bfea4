"""Policies on what carries an API key in clear text, and on the control-plane gateway:

* gateway-auth-needs-tls (mandatory): caller keys without HTTPS travel in clear text;
* endpoint-key-needs-tls (mandatory): a hand-written ModelEndpoint whose provider key would be
  sent (`Authorization: Bearer`) to an `http://` origin or url;
* gateway-redirect-with-keys (advisory): `plainHttp: Redirect` with caller keys: a client that
  calls `http://` sends its key in clear before it is redirected;
* gateway-exposed (advisory): a gateway reachable from anywhere (a LoadBalancer) without
  HTTPS or without caller keys.

The workload gateways need no finding: they serve only mutual TLS (modelplane.plan.gateway)."""

from __future__ import annotations

from collections.abc import Iterable

from modelplane.api import Fleet, InferenceGateway
from modelplane.render.gateway import CONTROL_GATEWAY

from .context import CheckContext
from .findings import ADVISORY, MANDATORY, Finding
from .registry import register

AUTH_NEEDS_TLS = "gateway-auth-needs-tls"
ENDPOINT_KEY_NEEDS_TLS = "endpoint-key-needs-tls"
REDIRECT_WITH_KEYS = "gateway-redirect-with-keys"
EXPOSED = "gateway-exposed"
SERVICE_TYPE = "kubernetes:core/v1:Service"


def _exposed(ctx: CheckContext, gw: InferenceGateway) -> bool:
    """On a LoadBalancer: the program's control-plane Service says so where the pack sees it;
    from manifests alone, a gateway on a named cluster is exposed unless that cluster is Kind
    (NodePort). Without a cluster name the stack's `controlPlane` decides where it runs
    (the kind stack's is a Kind cluster), which the manifests do not say: no guess."""
    for r in ctx.program:
        if r.type == SERVICE_TYPE and (r.props.get("metadata") or {}).get("name") == CONTROL_GATEWAY:
            return (r.props.get("spec") or {}).get("type") == "LoadBalancer"
    cluster = ctx.fleet.clusters.get(gw.spec.cluster_name or "")
    return cluster is not None and cluster.source != "Kind"


def _gateway(fleet: Fleet) -> InferenceGateway | None:
    return fleet.control_gateway()


@register(AUTH_NEEDS_TLS, MANDATORY, "caller API keys only over HTTPS")
def auth_needs_tls(ctx: CheckContext) -> Iterable[Finding]:
    gw = _gateway(ctx.fleet)
    if gw is not None and gw.spec.auth is not None and gw.spec.tls is None:
        yield Finding(AUTH_NEEDS_TLS, MANDATORY, ctx.ref(gw), "spec.auth",
                      "callers' API keys would travel in clear text: anyone on the path can read and replay "
                      "them. Fix: add spec.tls (certificateRefs, or selfSigned on kind/sim/render).")


@register(ENDPOINT_KEY_NEEDS_TLS, MANDATORY, "a ModelEndpoint's provider API key only over HTTPS")
def endpoint_key_needs_tls(ctx: CheckContext) -> Iterable[Finding]:
    for _, ep in sorted(ctx.fleet.endpoints.items()):
        spec = ep.spec
        target = spec.origin or spec.url or ""
        if spec.api_key_secret is None or not target.lower().startswith("http://"):
            continue
        field = "spec.origin" if spec.origin else "spec.url"
        yield Finding(ENDPOINT_KEY_NEEDS_TLS, MANDATORY, ctx.ref(ep), field,
                      f"the provider's API key (Secret {spec.api_key_secret.name}) would be sent as "
                      "`Authorization: Bearer` over plain http: anyone on the path can read and reuse it. "
                      f"Fix: use the provider's https:// {field.removeprefix('spec.')}, or remove the credential.")


@register(REDIRECT_WITH_KEYS, ADVISORY, "plain HTTP is refused, not redirected, when callers send API keys")
def redirect_with_keys(ctx: CheckContext) -> Iterable[Finding]:
    gw = _gateway(ctx.fleet)
    if gw is None or gw.spec.auth is None or gw.spec.tls is None or gw.spec.tls.plain_http != "Redirect":
        return
    yield Finding(REDIRECT_WITH_KEYS, ADVISORY, ctx.ref(gw), "spec.tls.plainHttp",
                  "a client that calls http:// sends its API key in clear text before the gateway redirects it "
                  "to https (the redirect comes too late to protect it). Fix: plainHttp: Refuse, so such a "
                  "client fails at once instead of leaking its key.")


@register(EXPOSED, ADVISORY, "a LoadBalancer control-plane gateway has HTTPS and caller API keys")
def exposed(ctx: CheckContext) -> Iterable[Finding]:
    gw = _gateway(ctx.fleet)
    if gw is None:
        return
    tls, auth = gw.spec.tls is not None, gw.spec.auth is not None
    if (tls and auth) or not _exposed(ctx, gw):
        return
    missing = " and ".join(w for w, on in (("HTTPS (spec.tls)", tls), ("caller API keys (spec.auth)", auth)) if not on)
    yield Finding(EXPOSED, ADVISORY, ctx.ref(gw), "spec.tls" if not tls else "spec.auth",
                  f"the control-plane gateway is a LoadBalancer reachable from anywhere without {missing}: "
                  "anyone who finds its address uses every model it serves, and prompts travel in clear text. "
                  "Fix: set spec.tls.certificateRefs and spec.auth.apiKey.secretSelector.")
