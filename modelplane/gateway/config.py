"""Traefik file-provider configuration for both gateway hops, as plain dicts.

Pure: the Pulumi program mounts these dicts (as YAML in a ConfigMap watched through
`providers.file.directory`) and the local stack writes the very same dicts to disk.

Why two hops shaped like this (docs/data-path.md, traefik-findings §3-4): Traefik
cannot rewrite the path per child of a weighted service, yet only a weighted service
with `healthCheck: {}` moves a dead child's share to the others at run time. So:

* control plane: `/<ns>/<svc>/` -> weighted over one child per workload cluster
  (weight = sum of that cluster's endpoint weights), path unchanged, each child
  health-checked on `/<ns>/<svc>/health/p<tier>` at that cluster's gateway;
* workload cluster: `/<ns>/<svc>/` -> prefix stripped -> weighted over the local
  replicas with their own weights and `/health` checks. Its `/<ns>/<svc>/health/p<N>`
  answers 503 exactly when no local replica of tier N is healthy, which is what the
  control plane's check reads. Separate routers serve those paths so health probes
  never advance the weighted round robin that user requests see.

Priority tiers (lower number preferred) are `failover` chains on both hops; with a
single tier they reduce to the plain weighted service.

External (hand-written) endpoints need their own path and an API key header, which
middlewares can only add on a router; each one gets a dedicated egress entrypoint on
the control-plane Traefik, reached through 127.0.0.1 (same pod in Kubernetes).
The egress part carries the key, so it is a separate dict meant for a Secret.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from modelplane.gateway.kvroute import TERMINAL_SERVICE, check_cache_aware, control_middleware, workload_middleware
from modelplane.gateway.security import (
    PLAIN,
    EdgeSecurity,
    HopTls,
    auth_middleware,
    auth_middleware_name,
    egress_transport,
    hop_transport_name,
    hop_transports,
    hop_url,
    plugin_static,
    redirect_router,
    tls_section,
)
from modelplane.json_types import JsonObject
from modelplane.routing import Credential, Endpoint, WeightedBackend, cluster_weights

WEB = "web"

Config = JsonObject  # plain Traefik configuration, dumped as YAML

# Retries never send again a request that may still be running (issue 27 item 3). Traefik
# retries a network error only while nothing of the request was written (traefik/traefik
# pkg/middlewares/retry/retry.go: `proxyReached && !wroteRequest`); a `status` retry resends
# even a written POST. So:
# * the control plane, which reaches workload gateways through a load balancer, retries 503
#   only: the answer of a gateway that ran nothing (its "no available server" before the cluster
#   is marked down, or its 502 turned 503, below). A 502/504 there may come from a connection the
#   load balancer cut while the engine still computes the completion: resending it would run it
#   again on another GPU, and the client still gets the error;
# * a workload gateway talks to the engine pod straight, so a broken engine connection means the
#   engine no longer runs the request (it crashed, or saw the connection close and aborted it):
#   it retries Traefik's 502 on another local replica, and answers 503 (UNPROCESSED_REWRITE)
#   when every attempt failed, for the control plane to try another cluster;
# * the egress, towards a provider behind its own load balancers, retries 503 only, as the
#   control plane does.
CONTROL_PLANE_RETRY_STATUS = ("503",)
HOP_RETRY_STATUS = ("502",)
EGRESS_RETRY_STATUS = ("503",)
# The workload gateway's last word when no replica could take the request: 503, not 502.
UNPROCESSED_REWRITE = "unprocessed-503"


@dataclass(frozen=True)
class Tuning:
    health_interval: str = "500ms"
    health_timeout: str = "300ms"
    retry_attempts: int = 3
    retry_initial_interval: str = "20ms"
    # Request bodies up to this size are read into memory before being forwarded, on
    # every hop (see _retry). Traefik 3.7 allocates this many bytes for every request,
    # whatever its size, so the bound is a per-request cost (measured per hop on the
    # 2-core box: 4 MiB ~2 ms, 64 KiB ~70 us, 16 KiB ~10 us). Larger bodies are still
    # served, streamed, without the 5xx retry. Unbounded (-1) would cost nothing for
    # small bodies but lets one huge upload fill the gateway's memory.
    retry_max_body: int = 16 * 1024
    # Off only to measure what it costs (benchmarks/gateway.py); without it, requests
    # sent to a cluster in the window before it is marked down fail.
    retry_on_5xx: bool = True


@dataclass(frozen=True)
class ServiceRoute:
    """One ModelService after `service_weights`: what both hops need to know."""

    namespace: str
    name: str
    backends: tuple[WeightedBackend, ...] = field(default_factory=tuple)
    # routingPolicy.balancing: CacheAware on the service: both hops route it through the kvroute
    # plugin (modelplane.gateway.kvroute) instead of the weighted round robin.
    cache_aware: bool = False

    @property
    def prefix(self) -> str:
        return f"/{self.namespace}/{self.name}"


def _id(*parts: str) -> str:
    return "-".join(re.sub(r"[^a-zA-Z0-9-]", "-", p) for p in parts)


def _health(path: str, t: Tuning) -> Config:
    return {"path": path, "interval": t.health_interval, "timeout": t.health_timeout}


def _retry(t: Tuning, statuses: Sequence[str]) -> Config:
    """Retries re-run the weighted pick, so a retried request lands on another child.

    Network errors (connection refused/reset) before anything was written cover an engine
    that died before its health check noticed; `statuses` are retried too, POSTs included
    (CONTROL_PLANE_RETRY_STATUS, HOP_RETRY_STATUS, EGRESS_RETRY_STATUS: only where the status
    says the request no longer runs anywhere).

    With statuses, the POST body is read into memory first (up to `retry_max_body`) so a
    retry can resend it. That buffering is also what keeps streams whole: Traefik's Go
    HTTP/1 server closes a request body as soon as the response headers are written,
    and Go's client transport reads the body once more after sending its last byte (to
    check for extra data). An engine that answers fast enough wins that race, the
    transport sees "invalid Read on closed Body" and closes the engine connection in
    the middle of the response: a stream cut after its headers, ~1 in 1,000 under CPU
    load. A buffered body is an in-memory reader the server cannot close.
    (test_streams_through_both_hops_are_never_cut_while_health_flaps.)
    """
    cfg: Config = {"attempts": t.retry_attempts, "initialInterval": t.retry_initial_interval}
    if statuses:
        cfg.update({"status": list(statuses), "retryNonIdempotentMethod": True,
                    "maxRequestBodyBytes": t.retry_max_body})
    return {"retry": cfg}


def _unprocessed() -> Config:
    """The workload gateway's 502 (every attempt at a local replica failed: refused, or the engine
    connection broke, so no engine runs the request) answered as 503, the one status the control
    plane resends on. Traefik's `errors` middleware (pkg/middlewares/customerrors/
    custom_errors.go: `statusRewrites`, the page fetched from `service` and sent with the
    rewritten code); `noop@internal` answers an empty page."""
    return {"errors": {"status": ["502"], "statusRewrites": {"502": 503}, "service": "noop@internal"}}


def _tiers(backends: Sequence[WeightedBackend]) -> list[list[WeightedBackend]]:
    prios = sorted({b.priority for b in backends})
    return [[b for b in backends if b.priority == p] for p in prios]


def tier_health_path(route: ServiceRoute, priority: int) -> str:
    """Workload-gateway path answering 200 while a local replica of that tier is healthy."""
    return f"{route.prefix}/health/p{priority}"


def _failover_chain(base: str, tier_names: list[str], services: Config) -> str:
    """Lower priority numbers are preferred; each higher tier is the fallback of the
    chain below it and takes traffic only once everything below it is down."""
    top = tier_names[-1]
    for i in range(len(tier_names) - 2, -1, -1):
        name = f"{base}-failover-{i}"
        services[name] = {"failover": {"service": tier_names[i], "fallback": top, "healthCheck": {}}}
        top = name
    return top


def egress_entrypoint(ep: Endpoint) -> str:
    return _id("egress", ep.namespace, ep.name)


def external_endpoints(routes: Sequence[ServiceRoute]) -> list[Endpoint]:
    seen: dict[tuple[str, str], Endpoint] = {}
    for r in routes:
        for b in r.backends:
            if b.endpoint.external:
                seen.setdefault(b.endpoint.key, b.endpoint)
    return [seen[k] for k in sorted(seen)]


def control_plane_config(
    routes: Sequence[ServiceRoute],
    cluster_gateways: Mapping[str, str],
    egress_urls: Mapping[tuple[str, str], str] | None = None,
    tuning: Tuning = Tuning(),
    edge: EdgeSecurity | None = None,
    hop: HopTls | None = None,
) -> Config:
    """Dynamic config of the control-plane gateway.

    `cluster_gateways`: workload cluster name -> base URL of its gateway (with `hop`, dialled
    over HTTPS whatever scheme it names). `egress_urls`: external endpoint key -> URL of its
    egress entrypoint. `edge`: HTTPS and caller authentication towards callers; `hop`: mutual
    TLS towards the workload gateways (modelplane.gateway.security).
    """
    egress_urls = egress_urls or {}
    missing = sorted({b.endpoint.cluster for r in routes for b in r.backends
                      if b.endpoint.cluster is not None and b.endpoint.cluster not in cluster_gateways})
    if missing:
        raise ValueError(f"no gateway URL for cluster(s) {', '.join(missing)}; "
                         "route with fleet_routes(..., reachable_clusters=...) to leave them out")
    routers: Config = {}
    services: Config = {}
    middlewares: Config = {}
    dialled: set[str] = set()
    for r in routes:
        if not r.backends:
            continue  # reference: no ready endpoint anywhere -> no route (404)
        base = _id("cp", r.namespace, r.name)
        if r.cache_aware:
            routers[base] = _cache_aware_router(r, base, cluster_gateways, middlewares, edge, hop)
            continue
        tier_names = []
        for tier in _tiers(r.backends):
            tname = f"{base}-p{tier[0].priority}"
            children = []
            for cluster, weight in cluster_weights(tier).items():
                child = f"{tname}-c-{_id(cluster)}"
                lb: Config = {
                    "servers": [{"url": hop_url(cluster_gateways[cluster], hop)}],
                    "healthCheck": _health(tier_health_path(r, tier[0].priority), tuning),
                }
                if hop is not None:
                    # Health checks use the service's transport: they present the client cert too.
                    lb["serversTransport"] = hop_transport_name(cluster)
                    dialled.add(cluster)
                services[child] = {"loadBalancer": lb}
                children.append({"name": child, "weight": weight})
            for b in tier:
                ep = b.endpoint
                if not ep.external:
                    continue
                child = f"{tname}-x-{_id(ep.namespace, ep.name)}"
                services[child] = {"loadBalancer": {
                    "servers": [{"url": egress_urls[ep.key]}],
                    "healthCheck": _health(f"{r.prefix}/v1/models", tuning),
                }}
                children.append({"name": child, "weight": b.weight})
            services[tname] = {"weighted": {"services": children, "healthCheck": {}}}
            tier_names.append(tname)
        top = _failover_chain(base, tier_names, services)
        routers[base] = _edge_router(r, ["retry"], top, middlewares, edge)
    statuses = CONTROL_PLANE_RETRY_STATUS if tuning.retry_on_5xx else ()
    middlewares["retry"] = _retry(tuning, statuses)
    extra: Config = {}
    if hop is not None and dialled:
        extra["serversTransports"] = hop_transports(hop, sorted(dialled))
    tls = None
    if edge is not None and edge.tls is not None:
        tls = tls_section(edge.tls, more=edge.more_certs)
        if edge.plain_http == "Redirect":
            redirect_routers, redirect_mws = redirect_router()
            routers.update(redirect_routers)
            middlewares.update(redirect_mws)
    return _dynamic(routers, services, middlewares, extra, tls)


def _edge_router(r: ServiceRoute, chain: list[str], service: str, middlewares: Config,
                 edge: EdgeSecurity | None) -> Config:
    """The control plane's router of one service: `chain`, after callerauth when callers are
    authenticated (its middleware added to `middlewares`), then `service`."""
    if edge is not None and edge.auth:
        # First: no request reaches the retry buffer or kvroute, let alone a backend, unauthenticated.
        auth = auth_middleware_name(r.namespace, r.name)
        middlewares[auth] = auth_middleware(edge, r.namespace, r.name)
        chain = [auth, *chain]
    router: Config = {"entryPoints": [WEB], "rule": f"PathPrefix(`{r.prefix}/`)", "middlewares": chain,
                      "service": service}
    if edge is not None and edge.tls is not None:
        router["tls"] = {}
    return router


def _cache_aware_router(r: ServiceRoute, base: str, cluster_gateways: Mapping[str, str], middlewares: Config,
                        edge: EdgeSecurity | None, hop: HopTls | None) -> Config:
    """A `balancing: CacheAware` service at the control plane: the service prefix stripped, then
    kvroute's cluster pick over the clusters' gateways at `<gateway>/<ns>/<svc>`, each with the
    weight the weighted round robin would give it. callerauth must run before kvroute: kvroute is
    terminal (it forwards the request itself and never calls the next handler), so whatever follows
    it never runs, and a request must be authenticated, its caller allowed and counted against the
    caller's limits before anything is forwarded. No `retry`: kvroute reads the body into memory
    itself and tries the next cluster on a refusal (503, 429, connection error)."""
    check_cache_aware(r.namespace, r.name, r.backends)
    strip, kv = f"{base}-strip", f"{base}-kvroute"
    middlewares[strip] = {"stripPrefix": {"prefixes": [r.prefix]}}
    clusters = sorted({b.endpoint.cluster for b in r.backends if b.endpoint.cluster is not None})
    urls = {c: hop_url(cluster_gateways[c], hop) for c in clusters}
    if hop is None:
        middlewares[kv] = control_middleware(r.prefix, r.backends, urls)
    else:
        tls: Config = {"caFile": hop.ca_file, "certFile": hop.cert.cert, "keyFile": hop.cert.key}
        middlewares[kv] = control_middleware(r.prefix, r.backends, urls, tls,
                                             {c: hop.server_name(c) for c in clusters})
    return _edge_router(r, [strip, kv], TERMINAL_SERVICE, middlewares, edge)


def egress_config(
    routes: Sequence[ServiceRoute],
    secret_value: Callable[[str, Credential], str] | None = None,
    tuning: Tuning = Tuning(),
    roots: str | None = None,
) -> Config:
    """Routers on the egress entrypoints: rewrite to the provider's prefix, attach the key.

    `secret_value(namespace, credential)` returns the API key; the result of this
    function therefore contains secrets and must be stored as a Secret, never logged.
    An https provider's certificate is verified for its host name, against `roots` (a CA
    bundle file in the gateway) when given.
    """
    routers: Config = {}
    services: Config = {}
    transports: Config = {}
    # Names differ from the control-plane dict's: both files load into one Traefik,
    # and the file provider rejects a name defined twice.
    middlewares: Config = {"egress-retry": _retry(tuning, EGRESS_RETRY_STATUS)}
    for ep in external_endpoints(routes):
        name = egress_entrypoint(ep)
        mws = [f"{name}-path"]
        # Any service path `/<ns>/<svc>/v1/...` becomes `<api prefix>/...` at the provider.
        middlewares[f"{name}-path"] = {"replacePathRegex": {
            "regex": r"^/[^/]+/[^/]+/v1(/.*)?$", "replacement": ep.api_prefix.rstrip("/") + "$1"}}
        if ep.credential is not None:
            if secret_value is None:
                raise ValueError(f"endpoint {ep.namespace}/{ep.name} needs a credential resolver")
            key = secret_value(ep.namespace, ep.credential)
            header = {"x-api-key": key} if ep.api_schema == "Anthropic" else {"Authorization": f"Bearer {key}"}
            middlewares[f"{name}-auth"] = {"headers": {"customRequestHeaders": header}}
            mws.append(f"{name}-auth")
        mws.append("egress-retry")
        routers[name] = {"entryPoints": [name], "rule": "PathPrefix(`/`)", "middlewares": mws, "service": name}
        # The provider sees its own host name, never the gateway's.
        lb: Config = {"servers": [{"url": ep.url}], "passHostHeader": False}
        parts = urlsplit(ep.url)
        if parts.scheme == "https" and parts.hostname:
            transports.update(egress_transport(name, parts.hostname, roots))
            lb["serversTransport"] = name
        services[name] = {"loadBalancer": lb}
    return _dynamic(routers, services, middlewares, {"serversTransports": transports} if transports else None)


def workload_config(cluster: str, routes: Sequence[ServiceRoute], tuning: Tuning = Tuning(),
                    hop: HopTls | None = None) -> Config:
    """Dynamic config of one workload cluster's gateway: its local replicas only. With `hop`
    it serves HTTPS only and only to clients presenting a certificate from the hop CA."""
    routers: Config = {}
    services: Config = {}
    middlewares: Config = {"retry": _retry(tuning, HOP_RETRY_STATUS), UNPROCESSED_REWRITE: _unprocessed()}
    replicas: dict[tuple[str, str], Endpoint] = {}
    for r in routes:
        local = [b for b in r.backends if b.endpoint.cluster == cluster]
        if not local:
            continue
        base = _id("wl", r.namespace, r.name)
        strip = f"{base}-strip"
        middlewares[strip] = {"stripPrefix": {"prefixes": [r.prefix]}}
        middlewares[f"{base}-probe"] = {"replacePath": {"path": "/health"}}
        # A probe that lands on a replica this gateway has not yet marked down must not
        # fail the whole cluster for the control plane: try every local replica.
        middlewares[f"{base}-probe-retry"] = {"retry": {
            "attempts": len(local) + 1, "status": ["500-599"]}}
        probe_mws = [f"{base}-probe", f"{base}-probe-retry"]
        tier_names, all_probes = [], []
        for tier in _tiers(local):
            tname, prio = f"{base}-p{tier[0].priority}", tier[0].priority
            children, probes = [], []
            for b in tier:
                replicas[b.endpoint.key] = b.endpoint
                child = _id("replica", b.endpoint.namespace, b.endpoint.name)
                children.append({"name": child, "weight": b.weight})
                probes.append({"name": child, "weight": 1})
            if not r.cache_aware:
                services[tname] = {"weighted": {"services": children, "healthCheck": {}}}
            # Probes get their own weighted services so that health checks never
            # advance the round robin that user requests see (exact splits).
            services[f"{tname}-health"] = {"weighted": {"services": probes, "healthCheck": {}}}
            routers[f"{tname}-health"] = {
                "entryPoints": [WEB], "rule": f"Path(`{tier_health_path(r, prio)}`)", "priority": 300,
                "middlewares": probe_mws, "service": f"{tname}-health"}
            tier_names.append(tname)
            all_probes += probes
        if r.cache_aware:
            # kvroute picks the replica and forwards to it itself (terminal: no retry after it, and
            # noop@internal is never reached); a broken engine connection is its 502, answered 503 so
            # that the control plane's kvroute tries another cluster. One tier: the API refuses more.
            middlewares[f"{base}-kvroute"] = workload_middleware(cluster, local)
            routers[base] = {"entryPoints": [WEB], "rule": f"PathPrefix(`{r.prefix}/`)", "priority": 100,
                             "middlewares": [strip, UNPROCESSED_REWRITE, f"{base}-kvroute"],
                             "service": TERMINAL_SERVICE}
        else:
            # The control plane picked a tier before sending here, so the lowest locally
            # healthy tier is that same tier; the chain only matters inside detection gaps.
            routers[base] = {"entryPoints": [WEB], "rule": f"PathPrefix(`{r.prefix}/`)", "priority": 100,
                             "middlewares": [strip, UNPROCESSED_REWRITE, "retry"],
                             "service": _failover_chain(base, tier_names, services)}
        services[f"{base}-health"] = {"weighted": {"services": all_probes, "healthCheck": {}}}
        routers[f"{base}-health"] = {"entryPoints": [WEB], "rule": f"Path(`{r.prefix}/health`)",
                                     "priority": 200, "middlewares": probe_mws,
                                     "service": f"{base}-health"}
    for _, ep in sorted(replicas.items()):
        child = _id("replica", ep.namespace, ep.name)
        services[child] = {"loadBalancer": {"servers": [{"url": ep.url}], "healthCheck": _health("/health", tuning)}}
        # The reference's per-replica path (`/<ns>/<replica>/`), kept for direct access.
        strip = f"{child}-strip"
        middlewares[strip] = {"stripPrefix": {"prefixes": [f"/{ep.namespace}/{ep.name}"]}}
        routers[child] = {"entryPoints": [WEB], "rule": f"PathPrefix(`/{ep.namespace}/{ep.name}/`)",
                          "priority": 50, "middlewares": [strip], "service": child}
    if hop is None:
        return _dynamic(routers, services, middlewares)
    for router in routers.values():
        router["tls"] = {}
    return _dynamic(routers, services, middlewares, tls=tls_section(hop.cert, client_ca=hop.ca_file))


def static_config(
    web_address: str,
    dynamic_dir: str,
    extra_entrypoints: Mapping[str, str] | None = None,
    api_address: str | None = None,
    throttle: str | None = None,
    *,
    api: bool = False,
    plugins: bool = False,
    plain_address: str | None = None,
    kvroute: bool = False,
) -> Config:
    """Traefik static config: file provider watching a directory, no access log.

    `plugins`: load the callerauth plugin, `kvroute` the kvroute plugin (both from
    ./plugins-local/src/ of Traefik's working directory); `plain_address`: the entry point that
    only redirects plain HTTP to HTTPS."""
    eps = {WEB: {"address": web_address}}
    if plain_address:
        eps[PLAIN] = {"address": plain_address}
    for name, addr in (extra_entrypoints or {}).items():
        eps[name] = {"address": addr}
    cfg: Config = {
        "global": {"checkNewVersion": False, "sendAnonymousUsage": False},
        "entryPoints": eps,
        "providers": {"file": {"directory": dynamic_dir, "watch": True}},
        "log": {"level": "ERROR", "noColor": True},
        # Said, not defaulted: no backend certificate is ever accepted unverified.
        "serversTransport": {"insecureSkipVerify": False},
    }
    if plugins or kvroute:
        cfg["experimental"] = plugin_static(callerauth=plugins, kvroute=kvroute)
    if throttle:
        # Traefik waits this long (default 2s) before applying a changed file.
        cfg["providers"]["providersThrottleDuration"] = throttle
    if api_address:
        # An internal entrypoint for readiness (`/ping`). The Traefik API stays off
        # unless asked for: it would serve the egress headers, i.e. the API keys.
        eps["traefik"] = {"address": api_address}
        cfg["ping"] = {"entryPoint": "traefik"}
        if api:
            cfg["api"] = {"insecure": True, "dashboard": False}
    return cfg


def _dynamic(routers: Config, services: Config, middlewares: Config, extra: Config | None = None,
             tls: Config | None = None) -> Config:
    http: Config = {}
    if routers:
        http["routers"] = routers
    if services:
        http["services"] = services
    if middlewares:
        http["middlewares"] = middlewares
    http.update(extra or {})
    out: Config = {"http": http}
    if tls is not None:
        out["tls"] = tls
    return out
