"""The Traefik dicts both hops are built from (pure; Traefik itself runs in tests/integration)."""
import pytest
import yaml

from modelplane.gateway.config import (
    ServiceRoute,
    Tuning,
    control_plane_config,
    egress_config,
    static_config,
    tier_health_path,
    workload_config,
)
from modelplane.routing import Credential, Endpoint, RouteEntry, compute_weights, replica_endpoint

NS = "ml-team"
KEY = "sk-test-not-a-real-key"


def route(entries, endpoints, name="chat"):
    return ServiceRoute(NS, name, tuple(compute_weights(entries, endpoints, namespace=NS)))


def rep(name, dep, cluster, url="http://engine:8000"):
    return replica_endpoint(NS, name, dep, cluster, 0, url=url)


SAAS = Endpoint(NS, "together", {"tier": "saas"}, url="https://api.together.xyz", external=True,
                credential=Credential("together-key"))
ROUTE = route(
    [RouteEntry("stable", 80, {"modelplane.ai/deployment": "a"}),
     RouteEntry("canary", 10, {"modelplane.ai/deployment": "b"}),
     RouteEntry("overflow", 10, {"tier": "saas"})],
    [rep("a-0", "a", "east"), rep("a-1", "a", "west"), rep("b-0", "b", "west"), SAAS],
)


def test_control_plane_has_one_child_per_cluster_weighted_by_endpoint_sums():
    http = control_plane_config([ROUTE], {"east": "http://gw-east", "west": "http://gw-west"},
                                {SAAS.key: "http://127.0.0.1:9001"})["http"]
    router = http["routers"]["cp-ml-team-chat"]
    assert router["rule"] == "PathPrefix(`/ml-team/chat/`)"
    assert router["middlewares"] == ["retry"]
    weighted = http["services"][router["service"]]["weighted"]
    assert weighted["healthCheck"] == {}
    # 80 over 2 endpoints (40, 40), 10, 10 -> /10 -> 4, 4, 1, 1
    assert {c["name"]: c["weight"] for c in weighted["services"]} == {
        "cp-ml-team-chat-p0-c-east": 4, "cp-ml-team-chat-p0-c-west": 5,
        "cp-ml-team-chat-p0-x-ml-team-together": 1}
    west = http["services"]["cp-ml-team-chat-p0-c-west"]["loadBalancer"]
    assert west["servers"] == [{"url": "http://gw-west"}]
    assert west["healthCheck"]["path"] == "/ml-team/chat/health/p0"
    assert http["middlewares"]["retry"]["retry"]["status"] == ["503"]


def test_control_plane_config_never_contains_the_key():
    cp = control_plane_config([ROUTE], {"east": "e", "west": "w"}, {SAAS.key: "http://127.0.0.1:9001"})
    assert KEY not in yaml.safe_dump(cp)


def test_egress_rewrites_to_the_provider_prefix_and_sets_the_key_header():
    def secret(ns, cred):
        return KEY if (ns, cred.secret_name) == (NS, "together-key") else ""

    http = egress_config([ROUTE], secret)["http"]
    r = http["routers"]["egress-ml-team-together"]
    assert r["entryPoints"] == ["egress-ml-team-together"]
    path, auth = (http["middlewares"][m] for m in r["middlewares"][:2])
    assert path["replacePathRegex"]["replacement"] == "/v1$1"
    assert auth == {"headers": {"customRequestHeaders": {"Authorization": f"Bearer {KEY}"}}}
    lb = http["services"]["egress-ml-team-together"]["loadBalancer"]
    assert lb == {"servers": [{"url": "https://api.together.xyz"}], "passHostHeader": False,
                  "serversTransport": "egress-ml-team-together"}


def test_egress_verifies_the_providers_certificate_for_its_host_name_never_skipping():
    http = egress_config([ROUTE], lambda ns, cred: KEY, roots="/etc/ssl/certs/ca-certificates.crt")["http"]
    assert http["serversTransports"] == {"egress-ml-team-together": {
        "serverName": "api.together.xyz", "insecureSkipVerify": False,
        "rootCAs": ["/etc/ssl/certs/ca-certificates.crt"]}}


def test_egress_without_a_resolver_refuses_rather_than_sending_no_key():
    with pytest.raises(ValueError, match="credential"):
        egress_config([ROUTE])


def test_anthropic_endpoints_get_x_api_key():
    ep = Endpoint(NS, "claude", {"tier": "saas"}, url="https://api.anthropic.com", external=True,
                  credential=Credential("k"), api_schema="Anthropic")
    http = egress_config([route([RouteEntry("o", 1, {"tier": "saas"})], [ep])], lambda ns, c: KEY)["http"]
    assert http["middlewares"]["egress-ml-team-claude-auth"]["headers"]["customRequestHeaders"] == {"x-api-key": KEY}


def test_workload_routes_local_replicas_with_their_weights_and_strips_the_prefix():
    http = workload_config("west", [ROUTE], Tuning(health_interval="1s"))["http"]
    router = http["routers"]["wl-ml-team-chat"]
    assert router["middlewares"] == ["wl-ml-team-chat-strip", "unprocessed-503", "retry"]
    assert http["middlewares"]["wl-ml-team-chat-strip"] == {"stripPrefix": {"prefixes": ["/ml-team/chat"]}}
    children = http["services"][router["service"]]["weighted"]["services"]
    assert {c["name"]: c["weight"] for c in children} == {"replica-ml-team-a-1": 4, "replica-ml-team-b-0": 1}
    assert "replica-ml-team-a-0" not in http["services"]  # lives in east
    lb = http["services"]["replica-ml-team-b-0"]["loadBalancer"]
    assert lb["healthCheck"] == {"path": "/health", "interval": "1s", "timeout": "300ms"}
    # health probes use their own weighted service, so they never shift the user split
    probe = http["routers"]["wl-ml-team-chat-p0-health"]
    assert probe["rule"] == f"Path(`{tier_health_path(ROUTE, 0)}`)"
    assert probe["service"] != router["service"]
    assert probe["priority"] > router["priority"]


def test_tiers_become_a_failover_chain_lowest_priority_first():
    r = route([RouteEntry("p", 1, {"modelplane.ai/deployment": "a"}, 0),
               RouteEntry("b1", 1, {"modelplane.ai/deployment": "b"}, 1),
               RouteEntry("b2", 1, {"modelplane.ai/deployment": "c"}, 2)],
              [rep("a-0", "a", "east"), rep("b-0", "b", "east"), rep("c-0", "c", "west")])
    http = control_plane_config([r], {"east": "e", "west": "w"})["http"]
    top = http["services"][http["routers"]["cp-ml-team-chat"]["service"]]["failover"]
    assert top["service"] == "cp-ml-team-chat-p0"
    assert http["services"][top["fallback"]]["failover"] == {
        "service": "cp-ml-team-chat-p1", "fallback": "cp-ml-team-chat-p2", "healthCheck": {}}


def test_service_with_no_ready_endpoint_gets_no_route():
    r = route([RouteEntry("a", 1, {"modelplane.ai/deployment": "a"})], [])
    assert "routers" not in control_plane_config([r], {})["http"]


def test_static_config_watches_a_directory_and_keeps_the_api_off():
    cfg = static_config("127.0.0.1:8000", "/etc/traefik/dynamic", {"egress-x": "127.0.0.1:9001"},
                        api_address="127.0.0.1:8080")
    assert cfg["providers"]["file"] == {"directory": "/etc/traefik/dynamic", "watch": True}
    assert cfg["entryPoints"]["egress-x"] == {"address": "127.0.0.1:9001"}
    assert "api" not in cfg and "accessLog" not in cfg
    assert cfg["log"] == {"level": "ERROR", "noColor": True}


def _retries(http):
    return {name: m["retry"] for name, m in http["middlewares"].items() if "retry" in m and name.endswith("retry")
            and not name.endswith("probe-retry")}


def test_every_hop_buffers_post_bodies_so_streams_are_not_cut():
    """Issue 9 "Also seen": a stream cut mid-body on a hop that forwarded the live request
    body (see gateway.config._retry). Every hop's user-path retry must read POST bodies
    into memory first: Traefik does that only with `status`, `retryNonIdempotentMethod`."""
    def secret(ns, cred):
        return KEY

    hops = {
        "control plane": control_plane_config([ROUTE], {"east": "e", "west": "w"}, {SAAS.key: "http://127.0.0.1:1"}),
        "workload": workload_config("west", [ROUTE]),
        "egress": egress_config([ROUTE], secret),
    }
    for hop, cfg in hops.items():
        retries = _retries(cfg["http"])
        assert retries, hop
        for name, r in retries.items():
            assert r["status"] and r["retryNonIdempotentMethod"] is True, (hop, name)
            assert r["maxRequestBodyBytes"] == Tuning().retry_max_body, (hop, name)
    assert _retries(hops["control plane"]["http"])["retry"]["status"] == ["503"]
    assert _retries(hops["workload"]["http"])["retry"]["status"] == ["502"]
    assert _retries(hops["egress"]["http"])["egress-retry"]["status"] == ["503"]


def test_no_hop_resends_a_post_that_may_still_be_running():
    """Issue 27 item 3. traefik/traefik pkg/middlewares/retry/retry.go (v3.7): a network error is
    retried only while `proxyReached && !wroteRequest`, but a `status` retry with
    `retryNonIdempotentMethod` resends a POST that was written. Behind a load balancer (control
    plane -> workload gateway, egress -> provider) a 502/504 may be a connection cut while the
    engine still computes (a 60 s Classic LB idle timeout cut >60 s completions, which then ran
    up to 3 times): those hops resend 503 only. The workload gateway, straight to the pod, retries
    its 502 (the engine connection broke: nothing runs the request any more) and answers 503 when
    every attempt failed (pkg/middlewares/customerrors/custom_errors.go `statusRewrites`), so the
    control plane tries another cluster. tests/integration/test_retry_written_posts.py drives it."""
    from modelplane.gateway.config import UNPROCESSED_REWRITE

    def secret(ns, cred):
        return KEY

    resent_after_write = {"502", "504", "500-599", "502-504", "500-504"}
    for hop, cfg in {"control plane": control_plane_config([ROUTE], {"east": "e", "west": "w"},
                                                           {SAAS.key: "http://127.0.0.1:1"}),
                     "egress": egress_config([ROUTE], secret)}.items():
        for name, r in _retries(cfg["http"]).items():
            assert not resent_after_write & set(r["status"]), (hop, name)
    wl = workload_config("west", [ROUTE])["http"]
    assert wl["middlewares"][UNPROCESSED_REWRITE] == {"errors": {
        "status": ["502"], "statusRewrites": {"502": 503}, "service": "noop@internal"}}
    users = [r for n, r in wl["routers"].items() if n.startswith("wl-") and not n.endswith("health")]
    assert users and all(r["middlewares"][1:] == [UNPROCESSED_REWRITE, "retry"] for r in users)


def test_retry_body_bound_stays_small_because_traefik_allocates_it_for_every_request():
    """Traefik 3.7 allocates maxRequestBodyBytes + 1 bytes per request, whatever the body:
    the former 4 MiB cost ~5 ms a request through both hops (issue 15 item 5)."""
    assert 16 * 1024 <= Tuning().retry_max_body <= 64 * 1024
