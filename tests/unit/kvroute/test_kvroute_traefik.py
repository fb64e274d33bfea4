"""The kvroute plugin (gateway-plugins/src/modelplane.local/kvroute, Go interpreted by Traefik's Yaegi)
on the real data path of one workload gateway: real Traefik, two live mock engines with the KV model,
a short replay sent through it one request at a time. The plugin must pick the replica the simulator's
best_replica picks (issue 29 asks >= 95% of the decisions; one at a time they should all agree), and
the engines must count the hits the simulator counts. One at a time no replica has a backlog, so the
choice is the overlap's, and a new conversation's the tie-break's (the replica holding fewer blocks):
the conversations here share no first block, or every one would follow the first.

These two tests configure the plugin by hand, with static lists, to compare its decisions with the
simulator's; test_generated_configuration_routes_through_kvroute_and_callerauth_still_refuses runs the
configuration modelplane.gateway.config generates for a `balancing: CacheAware` ModelService. Traefik's
local plugins: doc.traefik.io/traefik/plugins/ ("experimental.localPlugins", the sources under
./plugins-local/src/<moduleName>; static_config(kvroute=True) loads it)."""

from __future__ import annotations

import ssl
from pathlib import Path

import httpx
import pytest

from modelplane.api import load_manifest_text
from modelplane.autoscale.exposition import parse
from modelplane.gateway.fleet import fleet_routes
from modelplane.gateway.kvroute import KV_PLUGIN, SUMMARY_PATH
from modelplane.kvroute.engine import EngineProfile
from modelplane.kvroute.sim import build_fleet, simulate
from modelplane.kvroute.trace import TraceRequest
from modelplane.routing import DEPLOYMENT_LABEL
from modelplane.runtime import mock_engine
from modelplane.runtime.fleet import LocalSecurity
from modelplane.runtime.process import Engine, Traefik
from tests.integration.conftest import make_fleet  # noqa: F401 - the fixture: its fleet stopped, Traefik's log checked
from tests.integration.conftest import traefik as traefik  # noqa: F401 - make_fleet's fixture
from tests.integration.helpers import NS, refused_port, replica
from tests.manifests import model_service, service_entry, to_yaml
from tests.unit.kvroute.traces import conversations

pytestmark = pytest.mark.integration

BLOCKS = 40


def _sent(client: httpx.Client, url: str, trace: list[TraceRequest]) -> list[httpx.Headers]:
    """Each request of `trace` sent in order through `url`; the headers of every answer (all 200)."""
    headers = []
    for r in trace:
        answer = client.post(f"{url}/v1/chat/completions", json={
            "messages": [], "kv_block_hashes": list(r.blocks), "prompt_tokens": r.input_tokens,
            "max_tokens": r.output_tokens})
        assert answer.status_code == 200, answer.text
        headers.append(answer.headers)
    return headers


def test_traefik_with_the_plugin_picks_what_the_simulator_picks(tmp_path: Path) -> None:
    trace = [TraceRequest(i, float(i), r.input_tokens, 2, r.blocks)
             for i, r in enumerate(conversations(200, conversations=20, blocks_per_turn=2,
                                                  shared_root=False))]
    engines = [Engine(f"r{i}", tmp_path, deployment="chat",
                      extra=["--kv-blocks", str(BLOCKS), "--kv-time-scale", "0"]) for i in range(2)]
    traefik = Traefik("gw", tmp_path, kvroute=True)
    try:
        for e in engines:
            e.wait_ready()
        traefik.wait_ready()
        traefik.apply({"http": {
            "routers": {"kv": {"entryPoints": ["web"], "rule": "PathPrefix(`/`)", "middlewares": ["kv"],
                               "service": "noop@internal"}},
            "middlewares": {"kv": {"plugin": {KV_PLUGIN: {"replicas": [e.url for e in engines],
                                                          "kvBlocks": BLOCKS, "cluster": "c0"}}}}}}, timeout=60)
        with httpx.Client(timeout=10) as client:
            served = [h["x-served-by"] for h in _sent(client, traefik.url, trace)]
            summary = client.get(f"{traefik.url}/kvroute/summary").json()
            counted = [parse(client.get(f"{e.url}/metrics").content) for e in engines]
    finally:
        traefik.stop()
        for e in engines:
            e.stop()
    res = simulate(trace, build_fleet(1, 2, EngineProfile(kv_capacity_blocks=BLOCKS)), "cache-aware")
    expected = [f"r{p[1].rsplit('-r', 1)[1]}" if p else "" for p in res.placements]
    agree = sum(a == b for a, b in zip(served, expected, strict=True)) / len(trace)
    assert agree == 1.0, f"{agree:.1%} of the decisions agree"   # issue 29 asks >= 95%; one at a time, all
    hits = sum(m.families[mock_engine.METRIC_PREFIX_HITS].samples[0].value for m in counted)
    assert 0 < res.hits == hits
    assert set(served) == {"r0", "r1"}
    assert summary["cluster"] == "c0" and summary["replicas"] == 2 and summary["m"] == 65536


def test_traefik_with_the_plugin_skips_an_engine_it_cannot_reach(tmp_path: Path) -> None:
    """A workload gateway whose first replica's engine is gone (connection refused): through real
    Traefik (the plugin interpreted by Yaegi) every request is answered by the live engine with its
    whole body, as the round robin's retry would; with no engine reachable the answer is 503, which the
    control plane spills to another cluster on."""
    engine = Engine("r1", tmp_path, deployment="chat", extra=["--kv-blocks", str(BLOCKS), "--kv-time-scale", "0"])
    traefik = Traefik("gw", tmp_path, kvroute=True)
    trace = conversations(30, conversations=10, blocks_per_turn=2, shared_root=False)
    try:
        engine.wait_ready()
        traefik.wait_ready()
        with refused_port() as dead, httpx.Client(timeout=10) as client:
            def apply(replicas: list[str]) -> None:
                traefik.apply({"http": {
                    "routers": {"kv": {"entryPoints": ["web"], "rule": "PathPrefix(`/`)", "middlewares": ["kv"],
                                       "service": "noop@internal"}},
                    "middlewares": {"kv": {"plugin": {KV_PLUGIN: {"replicas": replicas, "kvBlocks": BLOCKS,
                                                                  "cluster": "c0"}}}}}}, timeout=60)
            apply([f"http://127.0.0.1:{dead}", engine.url])
            served = [h["x-served-by"] for h in _sent(client, traefik.url, trace)]
            counted = parse(client.get(f"{engine.url}/metrics").content)
            apply([f"http://127.0.0.1:{dead}"])
            none = client.post(f"{traefik.url}/v1/chat/completions",
                               json={"messages": [], "kv_block_hashes": [1], "prompt_tokens": 10})
    finally:
        traefik.stop()
        engine.stop()
    assert served == ["r1"] * len(trace)
    # the engine counted every prompt's tokens: each body reached it whole
    assert counted.families[mock_engine.METRIC_PREFIX_QUERIES].samples[0].value == sum(r.input_tokens for r in trace)
    assert none.status_code == 503


def test_a_2x2_slice_through_traefik_decides_as_the_simulator(tmp_path: Path) -> None:
    """Issue 29's agreement goal: 2 clusters x 2 live engines, each cluster behind the plugin as its workload
    gateway (publishing its summary), the plugin in its control-plane mode in front (reading the summaries
    before every request, as the simulator's publish interval 0 does), 2,000 requests one at a time. The
    (cluster, replica) of each must be the simulator's for >= 95% of them."""
    trace = [TraceRequest(i, float(i), r.input_tokens, 2, r.blocks)
             for i, r in enumerate(conversations(2000, conversations=150, blocks_per_turn=2))]
    names = [f"c{c}r{r}" for c in range(2) for r in range(2)]
    engines = {n: Engine(n, tmp_path, deployment="chat", extra=["--kv-blocks", str(BLOCKS), "--kv-time-scale", "0"])
               for n in names}
    traefik = Traefik("gw", tmp_path, kvroute=True)
    try:
        for e in engines.values():
            e.wait_ready()
        traefik.wait_ready()
        routers: dict[str, object] = {"cp": {"entryPoints": ["web"], "rule": "PathPrefix(`/v1`)", "middlewares": ["cp"],
                                             "service": "noop@internal"}}
        middlewares: dict[str, object] = {"cp": {"plugin": {KV_PLUGIN: {
            "clusters": [{"name": f"c{c}", "url": f"{traefik.url}/c{c}", "weight": 1} for c in range(2)],
            "summaryIntervalS": 0}}}}
        for c in range(2):
            routers[f"c{c}"] = {"entryPoints": ["web"], "rule": f"PathPrefix(`/c{c}/`)",
                                "middlewares": [f"strip{c}", f"c{c}"], "service": "noop@internal"}
            middlewares[f"strip{c}"] = {"stripPrefix": {"prefixes": [f"/c{c}"]}}
            middlewares[f"c{c}"] = {"plugin": {KV_PLUGIN: {"replicas": [engines[f"c{c}r{r}"].url for r in range(2)],
                                                          "kvBlocks": BLOCKS, "cluster": f"c{c}"}}}
        traefik.apply({"http": {"routers": routers, "middlewares": middlewares}}, timeout=60)
        with httpx.Client(timeout=10) as client:
            served = [(h["x-modelplane-cluster"], h["x-served-by"]) for h in _sent(client, traefik.url, trace)]
    finally:
        traefik.stop()
        for e in engines.values():
            e.stop()
    fleet = build_fleet(2, 2, EngineProfile(kv_capacity_blocks=BLOCKS))
    fleet.publish_interval_s = 0.0
    res = simulate(trace, fleet, "cache-aware")
    expected = [(p[0], p[1].replace("-", "")) if p else ("", "") for p in res.placements]
    agree = sum(a == b for a, b in zip(served, expected, strict=True)) / len(trace)
    assert agree >= 0.95, f"{agree:.1%} of 2,000 decisions agree"
    assert {c for c, _ in served} == {"c0", "c1"} and res.decisions["known"] > 100


KEY = "sk-alice-0123456789abcdef"


def test_generated_configuration_routes_through_kvroute_and_callerauth_still_refuses(make_fleet) -> None:  # noqa: ANN001, F811
    """The configuration modelplane.gateway.config generates for a `balancing: CacheAware` ModelService
    (fleet_routes over the loaded manifest), run by real Traefik with everything on: HTTPS and API keys at
    the edge, mutual TLS between the hops (kvroute dials the workload gateways with the hop CA and the
    control plane's client certificate). Three engines on c0, one on c1, so the plan weighs the clusters
    3:1. A 200-request conversation trace one at a time: every request is answered through kvroute on
    both hops (the control plane's plugin names the cluster it chose), the clusters share 3:1 as the plan
    weighs them, a turn that reaches its previous turn's cluster reaches its previous turn's replica (the
    engines count prefix hits), a request without a key is refused before kvroute, and a caller with a
    key reads no cluster's summary (what its replicas hold) through the control plane."""
    fleet = make_fleet(security=LocalSecurity(), kvroute=True)
    fleet.set_callers({"alice": KEY})
    entry = service_entry({DEPLOYMENT_LABEL: "chat"})
    entry["routingPolicy"] = {"balancing": "CacheAware"}
    manifests = load_manifest_text(to_yaml([model_service("chat", entry, namespace=NS)]))
    replicas = [replica("chat", i, "c0" if i < 3 else "c1") for i in range(4)]
    kv = ["--kv-blocks", "860", "--kv-time-scale", "0"]     # the plugin's default kvBlocks, no waits
    eps = fleet.start_engines(replicas, faults={r.name: kv for r in replicas})
    routes = fleet_routes(manifests, eps)
    assert routes[0].cache_aware
    fleet.apply_routes(routes, eps)
    trace = conversations(200, conversations=20, blocks_per_turn=2, shared_root=False)
    url = fleet.service_url(NS, "chat")
    verify = ssl.create_default_context(cafile=fleet.edge_cert.cert)
    with httpx.Client(timeout=10, verify=verify) as anon:
        refused = anon.post(f"{url}/v1/chat/completions", json={"messages": []})
    with httpx.Client(timeout=10, verify=verify, headers={"Authorization": f"Bearer {KEY}"}) as client:
        served = [(h["x-modelplane-cluster"], h["x-served-by"]) for h in _sent(client, url, trace)]
        summaries = [client.get(f"{url}{path}").status_code for path in (SUMMARY_PATH, f"{SUMMARY_PATH}/")]
        counted = [parse(client.get(f"{e.url}/metrics").content) for e in fleet.engines.values()]
    assert refused.status_code == 401 and refused.json()["error"]["code"] == "missing_api_key"
    assert summaries == [404, 404]
    assert all((cluster == "c0") == (name in ("chat-0", "chat-1", "chat-2")) for cluster, name in served)
    c1 = sum(cluster == "c1" for cluster, _ in served) / len(served)
    assert abs(c1 - 0.25) <= 0.05, f"c1 took {c1:.1%}, its weight is 1 of 4"
    last: dict[int, tuple[str, str]] = {}
    again = stayed = 0
    for r, where in zip(trace, served, strict=True):
        before = last.get(r.blocks[0])
        if before is not None and before[0] == where[0]:
            again += 1
            stayed += before == where
        last[r.blocks[0]] = where
    assert again > 50 and stayed >= 0.95 * again, f"{stayed} of {again} turns back on a cluster found their replica"
    hits = sum(m.families[mock_engine.METRIC_PREFIX_HITS].samples[0].value for m in counted)
    assert hits > 0
