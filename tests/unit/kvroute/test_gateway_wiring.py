"""`routingPolicy.balancing: CacheAware` wired into the generated gateway configuration (issue 29): the
dicts both hops are built from, the static configuration, and what `render` ships (pure; Traefik runs
them in test_kvroute_traefik.py)."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import replace
from pathlib import Path

import pytest

from modelplane.api import Fleet
from modelplane.api.placement_policy import RoutingPolicy
from modelplane.commands.output import load_fleet
from modelplane.commands.render import stream
from modelplane.gateway.config import ServiceRoute, control_plane_config, static_config, workload_config
from modelplane.gateway.kvroute import KV_PLUGIN, KV_PLUGIN_MODULE, SUMMARY_PATH, TERMINAL_SERVICE
from modelplane.gateway.security import PLUGIN, EdgeSecurity, auth_middleware_name
from modelplane.plan import ControlPlane, gitops_gateway_urls, plan_fleet
from modelplane.render.gateway import plugin_files
from modelplane.routing import RouteEntry
from modelplane.scheduler import place_fleet
from tests.unit.routing.test_gateway_config import NS, SAAS, rep, route
from tests.unit.routing.test_security_config import CLIENT, SERVER

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
# sha256 of `modelplane render EXAMPLE -` (the YAML stream) for every example, made with the code of
# b45c9ca, before kvroute was wired: a fleet without a CacheAware service renders byte for byte as then.
RENDERED_BEFORE = Path(__file__).with_name("rendered_before_kvroute.sha256.json")

URLS = {"east": "http://gw-east", "west": "http://gw-west"}
DEP = "modelplane.ai/deployment"


def cache_aware(entries: list[RouteEntry], endpoints: list) -> ServiceRoute:
    return replace(route(entries, endpoints), cache_aware=True)


# 90/10 over two deployments on two clusters; the stable one has two replicas on east.
CANARY = cache_aware([RouteEntry("stable", 9, {DEP: "a"}), RouteEntry("canary", 1, {DEP: "b"})],
                     [rep("a-0", "a", "east", "http://a-0:8000"), rep("a-1", "a", "east", "http://a-1:8000"),
                      rep("b-0", "b", "west", "http://b-0:8000")])


def plugin(cfg: dict, name: str) -> dict:
    return cfg["http"]["middlewares"][name]["plugin"][KV_PLUGIN]


@pytest.mark.parametrize(("edge", "hop", "chain", "clusters", "tls"), [
    pytest.param(None, None, ["cp-ml-team-chat-strip", "cp-ml-team-chat-kvroute"],
                 [{"name": "east", "url": "http://gw-east/ml-team/chat", "weight": 9},
                  {"name": "west", "url": "http://gw-west/ml-team/chat", "weight": 1}], None, id="plain"),
    pytest.param(EdgeSecurity(keys_dir="/callers"), None,
                 [auth_middleware_name(NS, "chat"), "cp-ml-team-chat-strip", "cp-ml-team-chat-kvroute"],
                 [{"name": "east", "url": "http://gw-east/ml-team/chat", "weight": 9},
                  {"name": "west", "url": "http://gw-west/ml-team/chat", "weight": 1}], None,
                 id="callerauth first"),
    pytest.param(None, CLIENT, ["cp-ml-team-chat-strip", "cp-ml-team-chat-kvroute"],
                 [{"name": "east", "url": "https://gw-east/ml-team/chat", "weight": 9,
                   "serverName": "east.gateway.modelplane.internal"},
                  {"name": "west", "url": "https://gw-west/ml-team/chat", "weight": 1,
                   "serverName": "gw.west.example"}],
                 {"caFile": "/hop/ca.crt", "certFile": "/hop/client.crt", "keyFile": "/hop/client.key"},
                 id="mutual TLS between the hops"),
])
def test_control_plane_routes_a_cache_aware_service_through_kvroute_with_the_plans_cluster_weights(
        edge: EdgeSecurity | None, hop: object, chain: list[str], clusters: list[dict], tls: dict | None,
) -> None:
    cfg = control_plane_config([CANARY], URLS, edge=edge, hop=hop)
    router = cfg["http"]["routers"]["cp-ml-team-chat"]
    assert router["middlewares"] == chain and router["service"] == TERMINAL_SERVICE
    assert cfg["http"]["middlewares"]["cp-ml-team-chat-strip"] == {"stripPrefix": {"prefixes": ["/ml-team/chat"]}}
    kv = plugin(cfg, "cp-ml-team-chat-kvroute")
    assert kv["clusters"] == clusters and kv.get("tls") == tls
    # No weighted round robin left for it: the plan's weights travel in the plugin's clusters.
    assert not [s for s in cfg["http"].get("services", {}) if s.startswith("cp-ml-team-chat")]
    if edge is not None:
        assert PLUGIN in cfg["http"]["middlewares"][chain[0]]["plugin"]


@pytest.mark.parametrize(("cluster", "replicas", "hop"), [
    pytest.param("east", ["http://a-0:8000", "http://a-1:8000"], None, id="two replicas"),
    pytest.param("west", ["http://b-0:8000"], None, id="one replica"),
    pytest.param("east", ["http://a-0:8000", "http://a-1:8000"], SERVER, id="served over mutual TLS"),
])
def test_workload_gateway_picks_its_replicas_with_kvroute_and_keeps_its_health_paths(
        cluster: str, replicas: list[str], hop: object) -> None:
    cfg = workload_config(cluster, [CANARY], hop=hop)
    http = cfg["http"]
    router = http["routers"]["wl-ml-team-chat"]
    assert router["middlewares"] == ["wl-ml-team-chat-strip", "unprocessed-503", "wl-ml-team-chat-kvroute"]
    assert router["service"] == TERMINAL_SERVICE
    assert plugin(cfg, "wl-ml-team-chat-kvroute") == {"replicas": replicas, "cluster": cluster}
    # The control plane's tier health probe and the per-replica paths stay as they were.
    assert http["routers"]["wl-ml-team-chat-p0-health"]["rule"] == "Path(`/ml-team/chat/health/p0`)"
    assert "wl-ml-team-chat-p0" not in http["services"] and "wl-ml-team-chat-p0-health" in http["services"]
    assert ("tls" in router) == (hop is not None)


@pytest.mark.parametrize(("entries", "endpoints", "words"), [
    pytest.param([RouteEntry("stable", 9, {DEP: "a"}), RouteEntry("canary", 1, {DEP: "b"})],
                 [rep("a-0", "a", "east"), rep("b-0", "b", "east")],
                 ["ModelService ml-team/chat", "cluster east holds replicas of entry canary (weight 1 over 1) and of "
                  "entry stable (weight 9 over 1)", "balancing: RoundRobin"], id="canary sharing a cluster"),
    pytest.param([RouteEntry("a", 1, {DEP: "a"}), RouteEntry("saas", 1, {"tier": "saas"})],
                 [rep("a-0", "a", "east"), SAAS],
                 ["ModelService ml-team/chat", "endpoint ml-team/together is a hand-written (external) one"],
                 id="external endpoint"),
])
def test_what_kvroute_cannot_honour_is_an_error_naming_the_service(entries: list[RouteEntry], endpoints: list,
                                                                  words: list[str]) -> None:
    with pytest.raises(ValueError) as exc:
        control_plane_config([cache_aware(entries, endpoints)], URLS, {SAAS.key: "http://127.0.0.1:1"})
    for w in words:
        assert w in str(exc.value)


def test_entries_of_equal_shares_may_share_a_cluster() -> None:
    """Two entries of weight 1, one with two replicas, one with one, all on east: each replica's share
    differs (1/4, 1/4, 1/2), refused; weight 2 for the two-replica entry gives each 1/3: accepted."""
    eps = [rep("a-0", "a", "east"), rep("a-1", "a", "east"), rep("b-0", "b", "east")]
    with pytest.raises(ValueError, match="unequal shares"):
        control_plane_config([cache_aware([RouteEntry("a", 1, {DEP: "a"}), RouteEntry("b", 1, {DEP: "b"})], eps)],
                             URLS)
    cfg = control_plane_config([cache_aware([RouteEntry("a", 2, {DEP: "a"}), RouteEntry("b", 1, {DEP: "b"})], eps)],
                               URLS)
    assert [c["name"] for c in plugin(cfg, "cp-ml-team-chat-kvroute")["clusters"]] == ["east"]


@pytest.mark.parametrize(("kwargs", "plugins"), [
    pytest.param({}, None, id="neither"),
    pytest.param({"plugins": True}, {PLUGIN: {"moduleName": "modelplane.local/callerauth"}}, id="callerauth"),
    pytest.param({"kvroute": True}, {KV_PLUGIN: {"moduleName": KV_PLUGIN_MODULE}}, id="kvroute"),
    pytest.param({"plugins": True, "kvroute": True}, {PLUGIN: {"moduleName": "modelplane.local/callerauth"},
                                                      KV_PLUGIN: {"moduleName": KV_PLUGIN_MODULE}}, id="both"),
])
def test_static_configuration_loads_kvroute_next_to_callerauth(kwargs: dict, plugins: dict | None) -> None:
    cfg = static_config(":8000", "/d", **kwargs)
    assert cfg.get("experimental", {}).get("localPlugins") == plugins


def _cache_aware_fleet(example: str) -> Fleet:
    """An example with every ModelService balanced CacheAware."""
    fleet = load_fleet(str(EXAMPLES / example))
    for svc in fleet.services.values():
        for e in svc.spec.endpoints:
            e.routing_policy = RoutingPolicy(balancing="CacheAware")
    return fleet


def _objects(fleet: Fleet) -> dict[tuple[str, str, str], dict]:
    plan = plan_fleet(fleet, place_fleet(fleet), ControlPlane(), egress="reference")
    return {(cluster, o["kind"], o["metadata"]["name"]): o
            for cluster, objs in plan.manifests(gitops_gateway_urls(fleet)[0]).items() for o in objs}


def test_render_ships_kvroute_to_every_gateway_of_a_cache_aware_fleet() -> None:
    objects = _objects(_cache_aware_fleet("kind"))
    gateways = [k for k in objects if k[1] == "Deployment" and "gateway" in k[2]
                and objects[k]["metadata"]["namespace"] == "modelplane-system"]
    assert len(gateways) >= 2   # the workload gateways and the control plane's
    files = plugin_files(KV_PLUGIN_MODULE)
    assert {"kvroute.go", "cluster.go", "summary.go", "go.mod", ".traefik.yml"} <= set(files)
    for cluster, _, name in gateways:
        pod = objects[(cluster, "Deployment", name)]["spec"]["template"]["spec"]
        (volume,) = [v for v in pod["volumes"] if v["name"] == "plugins"]
        shipped = objects[(cluster, "ConfigMap", volume["configMap"]["name"])]["data"]
        items = {i["path"]: shipped[i["key"]] for i in volume["configMap"]["items"]}
        assert {f"src/{KV_PLUGIN_MODULE}/{f}": text for f, text in files.items()}.items() <= items.items()
        assert pod["containers"][0]["workingDir"] == "/modelplane"
        static = objects[(cluster, "ConfigMap", f"{name}-static")]["data"]["traefik.yaml"]
        assert f"{KV_PLUGIN}:\n      moduleName: {KV_PLUGIN_MODULE}" in static
    routes = [o["data"]["routes.yaml"] for k, o in objects.items() if k[1] == "ConfigMap" and k[2].endswith("-routes")]
    assert routes and all(KV_PLUGIN in text for text in routes)


@pytest.mark.parametrize("example", sorted(json.loads(RENDERED_BEFORE.read_text())))
def test_examples_without_a_cache_aware_service_render_byte_for_byte_as_before(example: str) -> None:
    fleet = load_fleet(str(EXAMPLES / example))
    assert not any(svc.spec.cache_aware for svc in fleet.services.values())
    plan = plan_fleet(fleet, place_fleet(fleet), ControlPlane(), egress="reference")
    text = stream(plan.manifests(gitops_gateway_urls(fleet)[0]), "yaml")
    assert hashlib.sha256(text.encode()).hexdigest() == json.loads(RENDERED_BEFORE.read_text())[example]


def test_a_fleet_knows_it_is_cache_aware_once_and_forgets_when_a_service_is_added() -> None:
    """Every cluster's plan asks (plan_foundation); the answer is kept, so a 10k-cluster fleet scans its
    services once, not once per cluster (issue 31), and a ModelService added later is counted."""
    fleet = load_fleet(str(EXAMPLES / "kind"))
    plain = next(iter(fleet.services.values()))
    assert not fleet.cache_aware()
    balanced = plain.model_copy(deep=True)
    balanced.metadata.name = "balanced"
    for e in balanced.spec.endpoints:
        e.routing_policy = RoutingPolicy(balancing="CacheAware")
    fleet.add(balanced, "test#1")
    assert fleet.cache_aware()
    assert replace(fleet).cache_aware() and not replace(fleet, services={plain.key: plain}).cache_aware()


def test_the_summary_path_is_the_plugins_own():
    """Two homes, one per language, for one path: the Go plugin answers and fetches summaries at
    `clusterSummaryPath` (and its control-plane mode refuses callers there); the Python side's
    SUMMARY_PATH is what tests, docs and CLIs ask. A change to one without the other fails here."""
    plugin = Path(__file__).resolve().parents[3] / "gateway-plugins/src/modelplane.local/kvroute"
    source = (plugin / "kvroute.go").read_text()
    found = re.findall(r'^const clusterSummaryPath = "([^"]*)"$', source, flags=re.MULTILINE)
    assert found == [SUMMARY_PATH]
