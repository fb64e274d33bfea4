"""The scraped source against a hostile API server on 127.0.0.1 (tests/hostile/server.py): each
replica's serving pods listed, their /metrics read through the pod proxy
(`/api/v1/namespaces/{ns}/pods/{pod}:8000/proxy/metrics`) within the observe client's bounds,
parsed and turned into the decision's readings. A huge, endless, dripping, compressed-bomb,
NaN, wrong-typed or redirecting answer, refused credentials and a failing proxy are reasons
(the replica missing, its cluster unreachable or not read), never a value and never a
scale-down; no token and no label value a server sent (a secret in a label) is ever printed."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from modelplane.api import load_manifest_text
from modelplane.autoscale import Unreadable, decide
from modelplane.autoscale import conditions as c
from modelplane.autoscale.history import History
from modelplane.autoscale.pod_metrics import MAX_SCRAPED_PODS, ClusterMetrics, Prometheus, proxy_path, read_metrics
from modelplane.autoscale.prometheus import queries_for, with_bodies
from modelplane.autoscale.scraped import ScrapedMetricsSource, from_pods
from modelplane.observe.read import NotRead, Unreachable
from modelplane.scheduler import place_fleet
from tests.hostile.conftest import TOKEN, closed_port, kubeconfig
from tests.hostile.server import HostileServer, Objects
from tests.manifests import cluster, deployment, gpu_class, metric, pool, replica_autoscaler, to_yaml

NS = "ml"
SECRET = "sk-live-0123456789abcdefSECRET"


def honest(waiting: float = 3.0, running: float = 2.0, label: str = "chat") -> bytes:
    return (f'# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting{{model_name="{label}"}} {waiting}\n'
            f'# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{{model_name="{label}"}} {running}\n'
            ).encode()


def fleet_for(clusters: list[str]):
    docs = [gpu_class("g1", 1), *(cluster(name, pool("gpu", "g1", 2)) for name in clusters),
            deployment("chat", len(clusters), namespace=NS),
            replica_autoscaler("chat", "chat", 8, metric("QueueDepth", 1), metric("RequestsRunning", 2),
                               namespace=NS)]
    return load_manifest_text(to_yaml(docs))


def pod(name: str, cluster_name: str, index: int, *, ready: bool = True) -> dict:
    return {"metadata": {"name": name, "namespace": NS, "labels": {
        "app.kubernetes.io/managed-by": "modelplane", "modelplane.ai/deployment": "chat",
        "modelplane.ai/cluster": cluster_name, "modelplane.ai/replica-index": str(index),
        "modelplane.ai/serving": f"chat-{cluster_name}"}},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


@pytest.fixture(scope="module")
def server() -> Iterator[HostileServer]:
    with HostileServer.running() as s:
        yield s


def scrape(server: HostileServer, tmp_path: Path, modes: list[str], fuzz: bytes | None = None,
           timeout: float = 2.0, **kwargs):
    """A fleet of one cluster per mode, each replica's pod on it; read through the server. The
    pod on `metrics-fuzz` answers `fuzz`."""
    f = fleet_for(modes)
    placement = place_fleet(f)
    for r in placement.find(NS, "chat").replicas:
        server.objects[r.cluster] = Objects(pods=[pod(f"{r.name}-pod", r.cluster, r.index)])
        if r.cluster == "metrics-fuzz" and fuzz is not None:
            server.fuzz[proxy_path(NS, f"{r.name}-pod")] = fuzz
    configs = {m: kubeconfig(tmp_path / f"{m}.yaml", server.url(m) if m != "refused" else
                             f"http://127.0.0.1:{closed_port()}") for m in modes}
    return f, placement, read_metrics(configs, {(NS, "chat")}, timeout, **kwargs)


def decided(f, placement, readings, current: int = 2):
    replicas, failed = from_pods(placement, readings)
    source = ScrapedMetricsSource(f, placement, replicas, failed)
    scaler = f.autoscalers[(NS, "chat")]
    now = time.time()
    got = source.read(scaler, current, now)
    return got, decide(scaler, current, got, History.seeded(current, now - 1000), now)


def printed(*things) -> str:
    return json.dumps([repr(t) for t in things])


def test_honest_pods_read_through_the_proxy_give_the_readings(server, tmp_path) -> None:
    f = fleet_for(["metrics-fuzz"])
    placement = place_fleet(f)
    (r,) = placement.find(NS, "chat").replicas
    server.objects["metrics-fuzz"] = Objects(pods=[pod("p0", "metrics-fuzz", r.index)])
    server.fuzz[proxy_path(NS, "p0")] = honest(6, 2)
    readings = read_metrics({"metrics-fuzz": kubeconfig(tmp_path / "k.yaml", server.url("metrics-fuzz"))},
                            {(NS, "chat")}, 2.0)
    (reading,) = readings.values()
    assert isinstance(reading, ClusterMetrics) and [p.pod for p in reading.pods] == ["p0"]
    got, d = decided(f, placement, readings, current=1)
    assert (got["QueueDepth"].total, got["RequestsRunning"].total, got["QueueDepth"].reporting) == (6.0, 2.0, 1)
    assert d.desired == 5          # ceil(6 waiting / 1) = 6, step policy: +4 from 1
    asked = [(m, h) for m, h in server.received if m == "metrics-fuzz"]
    assert any(h.get("Authorization") == f"Bearer {TOKEN}" for _, h in asked)


HOSTILE = [
    # mode, how the cluster reads, what the replica is
    ("metrics-huge", ClusterMetrics, "larger than"),
    ("metrics-endless", ClusterMetrics, "larger than"),
    ("metrics-gzip-bomb", ClusterMetrics, "larger than"),
    ("metrics-failing", ClusterMetrics, "answered HTTP 500"),
    ("metrics-redirect", ClusterMetrics, "answered HTTP 302"),
    ("metrics-deep", ClusterMetrics, "is not in an engine pod's /metrics"),   # no line of an engine series
    ("metrics-unauthorized", NotRead, "credentials were refused"),
    ("metrics-drip", ClusterMetrics, "did not answer"),       # the pod's reason, not its cluster's
    ("refused", Unreachable, "Connection refused"),
]


@pytest.mark.parametrize("mode, kind, words", HOSTILE, ids=[m for m, _, _ in HOSTILE])
def test_a_hostile_answer_is_a_reason_never_a_value_or_a_scale_down(server, tmp_path, mode, kind, words) -> None:
    f, placement, readings = scrape(server, tmp_path, ["metrics-fuzz", mode], fuzz=honest(0, 0))  # the other: idle
    assert isinstance(readings[mode], kind), readings[mode]
    got, d = decided(f, placement, readings)
    text = printed(readings, got, d)
    if kind is ClusterMetrics:
        (bad,) = readings[mode].pods
        assert words in (bad.error or "") or words in d.message, (bad.error, d.message)
    else:
        assert words in readings[mode].reason, readings[mode].reason
        assert all(isinstance(v, Unreadable) for v in got.values())
    # the idle cluster alone never scales the deployment down
    assert d.desired == 2, d.message
    assert d.reason in (c.SCALE_DOWN_SKIPPED, c.FAILED_GET_METRICS, c.SCALE_DOWN_STABILIZED) or \
        d.condition(c.SCALING_ACTIVE).status == c.FALSE, d.reason
    assert TOKEN not in text and "\x1b" not in text


FUZZ = [
    ("NaN", b"# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting NaN\n"
            b"# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 1\n", "NaN"),
    ("infinite", b"# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting +Inf\n", "infinite"),
    ("a counter where a gauge belongs", b"# TYPE vllm:num_requests_waiting counter\n"
                                        b"vllm:num_requests_waiting_total 4\n", "is a counter there"),
    ("not the text format", b"{\"items\": []}\n", "is not in an engine pod's /metrics"),
    ("a secret in a label and a broken line", f'vllm:num_requests_waiting{{token="{SECRET}"}} 1 2 3 x\n'.encode(),
     "line 1 of the engines' series in the /metrics response"),
]


@pytest.mark.parametrize("name, body, words", FUZZ, ids=[n for n, _, _ in FUZZ])
def test_wrong_values_are_reasons_and_quote_nothing_the_engine_sent(server, tmp_path, name, body, words) -> None:
    f = fleet_for(["metrics-fuzz"])
    placement = place_fleet(f)
    (r,) = placement.find(NS, "chat").replicas
    server.objects["metrics-fuzz"] = Objects(pods=[pod("p0", "metrics-fuzz", r.index)])
    server.fuzz[proxy_path(NS, "p0")] = body
    readings = read_metrics({"metrics-fuzz": kubeconfig(tmp_path / "k.yaml", server.url("metrics-fuzz"))},
                            {(NS, "chat")}, 2.0)
    got, d = decided(f, placement, readings, current=1)
    assert isinstance(got["QueueDepth"], Unreadable) and words in got["QueueDepth"].reason, got
    assert d.desired == 1
    assert SECRET not in printed(got, d)       # the raw body stays in the reading; no message quotes it


def test_a_secret_in_a_label_of_an_honest_answer_is_never_printed(server, tmp_path) -> None:
    f = fleet_for(["metrics-fuzz"])
    placement = place_fleet(f)
    (r,) = placement.find(NS, "chat").replicas
    server.objects["metrics-fuzz"] = Objects(pods=[pod("p0", "metrics-fuzz", r.index)])
    server.fuzz[proxy_path(NS, "p0")] = honest(2, 2, label=SECRET)
    readings = read_metrics({"metrics-fuzz": kubeconfig(tmp_path / "k.yaml", server.url("metrics-fuzz"))},
                            {(NS, "chat")}, 2.0)
    got, d = decided(f, placement, readings, current=1)
    assert got["QueueDepth"].total == 2.0
    assert SECRET not in printed(got, d, d.to_json())


def test_pods_not_ready_or_missing_are_not_ready_replicas(server, tmp_path) -> None:
    f = fleet_for(["metrics-fuzz"])
    placement = place_fleet(f)
    (r,) = placement.find(NS, "chat").replicas
    server.objects["metrics-fuzz"] = Objects(pods=[pod("p0", "metrics-fuzz", r.index, ready=False)])
    readings = read_metrics({"metrics-fuzz": kubeconfig(tmp_path / "k.yaml", server.url("metrics-fuzz"))},
                            {(NS, "chat")}, 2.0)
    assert not [p for p in readings["metrics-fuzz"].pods if p.body is not None]   # not Ready: not asked
    got, _ = decided(f, placement, readings, current=1)
    assert got["QueueDepth"].unready == 1 and got["QueueDepth"].reporting == 0
    server.objects["metrics-fuzz"] = Objects(pods=[])
    got, _ = decided(f, placement, read_metrics(
        {"metrics-fuzz": kubeconfig(tmp_path / "k.yaml", server.url("metrics-fuzz"))}, {(NS, "chat")}, 2.0),
        current=1)
    assert got["QueueDepth"].unready == 1


def test_the_pod_list_is_bounded_and_the_rest_said_so(server, tmp_path) -> None:
    f = fleet_for(["metrics-fuzz"])
    many = [pod(f"p{i}", "metrics-fuzz", 0, ready=False) for i in range(MAX_SCRAPED_PODS + 3)]
    server.objects["metrics-fuzz"] = Objects(pods=many)
    reading = read_metrics({"metrics-fuzz": kubeconfig(tmp_path / "k.yaml", server.url("metrics-fuzz"))},
                           {(NS, "chat")}, 5.0)["metrics-fuzz"]
    assert len(reading.pods) == MAX_SCRAPED_PODS + 3
    assert sum(1 for p in reading.pods if p.error and "not read" in p.error) == 3
    assert f.autoscalers


def test_a_prometheus_answers_for_the_pods_through_the_service_proxy(server, tmp_path) -> None:
    f = fleet_for(["metrics-fuzz"])
    placement = place_fleet(f)
    (r,) = placement.find(NS, "chat").replicas
    server.objects["metrics-fuzz"] = Objects(pods=[pod("p0", "metrics-fuzz", r.index)])
    prom = Prometheus(service="monitoring/prometheus:9090")
    queries = queries_for(f)
    assert [q.promql for q in queries] == ["sum by (namespace, pod) (vllm:num_requests_running)",
                                           "sum by (namespace, pod) (vllm:num_requests_waiting)"]
    vector = {"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": {"namespace": NS, "pod": "p0"}, "value": [1.0, "3"]},
        {"metric": {"namespace": NS, "pod": "someone-else", "token": SECRET}, "value": [1.0, "99"]}]}}
    server.fuzz[prom.query_path()] = json.dumps(vector).encode()
    readings = read_metrics({"metrics-fuzz": kubeconfig(tmp_path / "k.yaml", server.url("metrics-fuzz"))},
                            {(NS, "chat")}, 2.0, prometheus={"metrics-fuzz": prom}, queries=[q.promql for q in queries])
    reading = with_bodies(readings["metrics-fuzz"], queries)
    got, d = decided(f, placement, {"metrics-fuzz": reading}, current=1)
    assert (got["QueueDepth"].total, got["RequestsRunning"].total) == (3.0, 3.0)
    assert SECRET not in printed(reading, got, d)
    # a Prometheus answering the wrong shape, NaN, or too much: reasons
    server.fuzz[prom.query_path()] = b'{"status": "success", "data": {"resultType": "vector", "result": {}}}'
    readings = read_metrics({"metrics-fuzz": kubeconfig(tmp_path / "k.yaml", server.url("metrics-fuzz"))},
                            {(NS, "chat")}, 2.0, prometheus={"metrics-fuzz": prom}, queries=[q.promql for q in queries])
    got, d = decided(f, placement, {"metrics-fuzz": with_bodies(readings["metrics-fuzz"], queries)}, current=1)
    assert all(isinstance(v, Unreadable) for v in got.values()) and d.desired == 1
    nan = {"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": {"namespace": NS, "pod": "p0"}, "value": [1.0, "NaN"]}]}}
    server.fuzz[prom.query_path()] = json.dumps(nan).encode()
    readings = read_metrics({"metrics-fuzz": kubeconfig(tmp_path / "k.yaml", server.url("metrics-fuzz"))},
                            {(NS, "chat")}, 2.0, prometheus={"metrics-fuzz": prom}, queries=[q.promql for q in queries])
    got, _ = decided(f, placement, {"metrics-fuzz": with_bodies(readings["metrics-fuzz"], queries)}, current=1)
    assert isinstance(got["QueueDepth"], Unreadable) and "NaN" in got["QueueDepth"].reason


@pytest.mark.parametrize("given, words", [
    ({"service": "prometheus:9090"}, "namespace/name:port"),
    ({"service": "monitoring/prometheus:http"}, "namespace/name:port"),
    ({"url": "ftp://x"}, "http:// or https://"),
    ({"service": "a/b:1", "url": "http://x"}, "exactly one"),
])
def test_a_prometheus_is_named_one_way(given, words) -> None:
    with pytest.raises(ValueError) as exc:
        Prometheus(**given)
    assert words in str(exc.value)


def test_reads_stop_at_the_timeout_whatever_the_server_does(server, tmp_path) -> None:
    started = time.monotonic()
    _, _, readings = scrape(server, tmp_path, ["metrics-drip", "metrics-endless"], timeout=1.0)
    assert time.monotonic() - started < 1.0 + 2.5
    drip = readings["metrics-drip"]            # its pod's reason: the cluster itself answered
    assert isinstance(drip, ClusterMetrics) and drip.cluster == "metrics-drip"
    assert all(p.body is None and "did not answer" in (p.error or "") for p in drip.pods), drip.pods
