"""The engines' /metrics, read through each cluster's API server: the autoscaler's scraped
source (docs/autoscaling.md, "Where the metrics come from"). Its only I/O, beside
modelplane.observe.read's.

    readings = read_metrics({"eu-west": kubeconfig}, {("ml-team", "chat")}, timeout=5)

On every cluster at once (one thread each), within `timeout` seconds in all:

1. list the serving pods of ours (`app.kubernetes.io/managed-by=modelplane`, `modelplane.ai/serving`)
   of the autoscaled deployments, typed as modelplane.observe.schema reads them;
2. for each Ready one, GET `/api/v1/namespaces/{ns}/pods/{pod}:{port}/proxy/metrics` (the API
   server's pod proxy, with the kubeconfig's credentials): at most MAX_METRICS_RESPONSE_BYTES
   an answer, inflated by our client with its bound, never redirected; POD_READERS pods at once,
   each within POD_READ_SHARE of the timeout (a pod that does not answer in it is that pod's
   reason, not its cluster's). With `window` > 0 each
   pod is read twice, `window` seconds apart, so a histogram's percentile covers that interval;
2'. or, for a cluster whose Prometheus the user named, instant queries there instead
   (`GET /api/v1/query`, through the API server's service proxy or at a URL), bounded the same
   way and at most MAX_METRICS_SAMPLES samples (modelplane.autoscale.prometheus writes them).

Of what the pods answered, only the lines of the engines' series are kept, as bytes
(modelplane.autoscale.exposition.select_families; parsed later by the same module), so a pod
that answers megabytes of other series costs its read, not its size in memory; a pod whose
answer could not be had gets the reason instead, as outside text (no URL user-info,
no token, no control character). A cluster whose API server does not answer is Unreachable, one
whose kubeconfig or answers are unusable NotRead (read.py's kinds): both a reason, never a value.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Collection, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import msgspec

from modelplane.json_types import JsonMapping
from modelplane.kube import BadAnswer, KubeAccess, KubeClient, NoAnswer, decode
from modelplane.limits import MAX_METRICS_RESPONSE_BYTES, MAX_METRICS_SAMPLES
from modelplane.observe import DEFAULT_READ_TIMEOUT_S
from modelplane.observe.objects import ReplicaKey, meta, pod_replica
from modelplane.observe.read import OURS, NotRead, Unreachable, _reason, concurrently, with_cluster
from modelplane.observe.schema import Pod
from modelplane.vocabulary import ENGINE_PORT, LABEL_SERVING

from .engines import SERIES_NAMES
from .exposition import ExpositionError, select_families

# Pods scraped per cluster and read: past it the rest are not read (missing replicas, said so).
MAX_SCRAPED_PODS = 1000
# What one pod's /metrics request may take of a cluster read's timeout (it has at least
# MIN_POD_READ_S), and how many of a cluster's pods are read at once: a dripping pod costs its
# reader this much, not the whole read of its cluster.
POD_READ_SHARE = 0.25
MIN_POD_READ_S = 0.5
POD_READERS = 8
SERVING_PODS = f"{OURS},{LABEL_SERVING}"
METRICS_ACCEPT = "text/plain;version=0.0.4;q=1,*/*;q=0.1"
SERIES_LABELS = ("namespace", "pod", "le")


@dataclass(frozen=True)
class PodScrape:
    """One serving pod of an autoscaled replica, and what its /metrics answered."""

    replica: ReplicaKey
    pod: str
    ready: bool
    body: bytes | None = None                  # the last answer
    before: bytes | None = None                # the answer `window` seconds earlier
    error: str | None = None                   # why there is no body (never its content)


@dataclass(frozen=True)
class Prometheus:
    """A Prometheus that scrapes a cluster's engines, named by the user: a Service reached
    through the cluster's API server (`service: "monitoring/prometheus-k8s:9090"`, the
    kubeconfig's credentials, the API server's service proxy) or a URL reached directly
    (`url: "https://prometheus.example.com"`, no credential sent). Its series must carry the
    `namespace` and `pod` labels, as the Prometheus Operator's PodMonitor and ServiceMonitor
    relabelling gives them."""

    service: str | None = None
    url: str | None = None

    def __post_init__(self) -> None:
        if (self.service is None) == (self.url is None):
            raise ValueError("a Prometheus is a service (namespace/name:port) or a url, exactly one")
        if self.service is not None:
            ns, slash, rest = self.service.partition("/")
            name, colon, port = rest.partition(":")
            if not (slash and colon and ns and name and port.isdigit() and 0 < int(port) < 65536):
                raise ValueError("a Prometheus service is written namespace/name:port, e.g. monitoring/prometheus:9090")
        elif not (self.url or "").startswith(("http://", "https://")):
            raise ValueError("a Prometheus url starts with http:// or https://")

    def query_path(self) -> str:
        if self.service is None:
            return "/api/v1/query"
        ns, _, rest = self.service.partition("/")
        name, _, port = rest.partition(":")
        return f"/api/v1/namespaces/{quote(ns, safe='')}/services/{quote(name, safe='')}:{port}/proxy/api/v1/query"


class _PromSample(msgspec.Struct):
    metric: dict[str, str] = msgspec.field(default_factory=dict)
    value: tuple[float, str] | None = None


class _PromData(msgspec.Struct):
    resultType: str = ""                                  # noqa: N815 - the API's name
    result: list[_PromSample] = msgspec.field(default_factory=list)


class _PromAnswer(msgspec.Struct):
    status: str = ""
    data: _PromData | None = None
    errorType: str | None = None                          # noqa: N815 - the API's name


@dataclass(frozen=True)
class Series:
    """One sample of an instant query's vector: its labels and its value, as Prometheus wrote it."""

    labels: tuple[tuple[str, str], ...]
    value: str

    def label(self, key: str) -> str | None:
        return next((v for k, v in self.labels if k == key), None)


@dataclass(frozen=True)
class ClusterMetrics:
    cluster: str
    pods: tuple[PodScrape, ...] = ()
    # With a Prometheus: each query's vector (or why it could not be had), in query order.
    series: tuple[tuple[Series, ...] | str, ...] = ()


MetricsReading = ClusterMetrics | Unreachable | NotRead


def pod_ready(pod: JsonMapping) -> bool:
    """Running, Ready, and not being deleted."""
    status = pod.get("status")
    if meta(pod).get("deletionTimestamp") or not isinstance(status, dict) or status.get("phase") != "Running":
        return False
    return any(isinstance(c, dict) and c.get("type") == "Ready" and c.get("status") == "True"
               for c in status.get("conditions") or [])


def proxy_path(namespace: str, pod: str, port: int = ENGINE_PORT) -> str:
    return f"/api/v1/namespaces/{quote(namespace, safe='')}/pods/{quote(pod, safe='')}:{port}/proxy/metrics"


def _get(kube: KubeClient, path: str, deadline: float, share: float) -> tuple[bytes | None, str | None]:
    """(body, None) or (None, why): the pod's answer through the proxy, bounded, within `share`
    seconds of its own: a pod that answers slowly (or not) is that pod's reason, and leaves the
    others of its cluster the rest of the time."""
    try:
        answer = kube.request("GET", path, deadline=min(deadline, time.monotonic() + share),
                              limit=MAX_METRICS_RESPONSE_BYTES, headers={"Accept": METRICS_ACCEPT})
    except BadAnswer as exc:
        return None, _reason(f"/metrics unusable: {exc}")
    except NoAnswer as exc:
        return None, _reason(f"/metrics did not answer: {exc}")
    code = answer.status_code
    if code == 200:
        try:
            return select_families(answer.content, SERIES_NAMES), None
        except ExpositionError as exc:
            return None, str(exc)
    if code in (401, 403):
        raise BadAnswer(f"{answer.what}: HTTP {code}, the credentials were refused")
    return None, f"the pod's /metrics answered HTTP {code} through the API server's proxy"


def query(client: KubeClient, prometheus: Prometheus, promql: str, deadline: float) -> tuple[Series, ...] | str:
    """An instant query's vector, bounded as every answer (bytes, time, shape, at most
    MAX_METRICS_SAMPLES samples), or why not (outside text: an error never quotes the answer)."""
    try:
        answer = client.request("GET", prometheus.query_path(), params={"query": promql}, deadline=deadline,
                                limit=MAX_METRICS_RESPONSE_BYTES)
    except BadAnswer as exc:
        return _reason(f"the Prometheus answer is unusable: {exc}")
    if answer.status_code in (401, 403):
        raise BadAnswer(f"{answer.what}: HTTP {answer.status_code}, the credentials were refused")
    if answer.status_code != 200:
        return f"the Prometheus answered HTTP {answer.status_code}"
    try:
        doc = decode(answer.content, _PromAnswer, answer.what)
    except BadAnswer as exc:
        return _reason(str(exc))
    if doc.status != "success" or doc.data is None or doc.data.resultType != "vector":
        return "the Prometheus answered no vector (status " + _reason(doc.status or "missing")[:40] + ")"
    if len(doc.data.result) > MAX_METRICS_SAMPLES:
        return f"the Prometheus answered more than {MAX_METRICS_SAMPLES} samples (see modelplane/limits.py)"
    # Only the labels that place a sample: nothing else a Prometheus sent is kept.
    return tuple(Series(tuple(sorted((k, v) for k, v in r.metric.items() if k in SERIES_LABELS)), r.value[1])
                 for r in doc.data.result if r.value is not None)


def read_cluster_metrics(cluster: str, kubeconfig: Path | str, deployments: Collection[tuple[str, str]],
                         timeout: float = DEFAULT_READ_TIMEOUT_S, context: str | None = None, *,
                         window: float = 0.0, port: int = ENGINE_PORT, cancel: threading.Event | None = None,
                         prometheus: Prometheus | None = None, queries: Sequence[str] = ()) -> MetricsReading:
    """The serving pods of `deployments` on one cluster, with each Ready pod's /metrics (the pod
    proxy) or, given a `prometheus`, the vectors of `queries` instead."""
    deadline = time.monotonic() + timeout
    share = max(timeout * POD_READ_SHARE, MIN_POD_READ_S)
    wanted = set(deployments)

    def scrape(kube: KubeClient) -> ClusterMetrics:
        pods = kube.list_all("/api/v1/pods", {"labelSelector": SERVING_PODS}, deadline, Pod)
        ours = []
        for pod in pods:
            key = pod_replica(pod)
            if key is None or (key.namespace, key.deployment) not in wanted or key.cluster != cluster:
                continue
            ours.append((key, str(meta(pod).get("name") or ""), pod_ready(pod)))
        ours.sort(key=lambda p: (p[0], p[1]))
        if prometheus is not None:
            listed = tuple(PodScrape(key, name, ready) for key, name, ready in ours)
            asked = (kube if prometheus.url is None else
                     KubeClient(prometheus.url, timeout=timeout, access=KubeAccess(prometheus.url), cancel=cancel))
            with contextlib.ExitStack() as stack:
                if asked is not kube:
                    stack.enter_context(asked)
                vectors = tuple(query(asked, prometheus, q, deadline) for q in queries)
            return ClusterMetrics(cluster, listed, vectors)
        ready_pods = {i: proxy_path(key.namespace, name, port)
                      for i, (key, name, ready) in enumerate(ours[:MAX_SCRAPED_PODS]) if ready}
        with ThreadPoolExecutor(POD_READERS, thread_name_prefix=f"observe-{cluster}-pods") as pool:

            def each() -> dict[int, tuple[bytes | None, str | None]]:
                # Every answer within its share of the timeout: the pool is done by the deadline.
                futures = {i: pool.submit(_get, kube, path, deadline, share) for i, path in ready_pods.items()}
                return {i: f.result() for i, f in futures.items()}

            first: dict[int, tuple[bytes | None, str | None]] = {}
            if window > 0:
                first = each()
                time.sleep(max(0.0, min(window, deadline - time.monotonic() - 0.5)))
            last = each()
        out = []
        for i, (key, name, ready) in enumerate(ours):
            if i >= MAX_SCRAPED_PODS:
                out.append(PodScrape(key, name, ready, error=f"more than {MAX_SCRAPED_PODS} serving pods on "
                                                             "this cluster: not read"))
            elif not ready:
                out.append(PodScrape(key, name, ready))
            else:
                body, error = last[i]
                out.append(PodScrape(key, name, ready, body, first.get(i, (None, None))[0], error))
        return ClusterMetrics(cluster, tuple(out))

    return with_cluster(cluster, kubeconfig, timeout, context, cancel, scrape)


def read_metrics(kubeconfigs: Mapping[str, Path | str], deployments: Collection[tuple[str, str]],
                 timeout: float = DEFAULT_READ_TIMEOUT_S, contexts: Mapping[str, str] | None = None, *,
                 window: float = 0.0, prometheus: Mapping[str, Prometheus] | None = None,
                 queries: Sequence[str] = ()) -> dict[str, MetricsReading]:
    """`read_cluster_metrics` on every cluster at once, within about `timeout` seconds whatever
    the clusters do (read.concurrently: a reader still busy is told to stop, its cluster
    Unreachable). A cluster named in `prometheus` is asked `queries` there instead of its pods."""
    return concurrently(kubeconfigs, timeout, lambda name, path, cancel: read_cluster_metrics(
        name, path, deployments, timeout, (contexts or {}).get(name), window=window, cancel=cancel,
        prometheus=(prometheus or {}).get(name), queries=queries))


__all__ = ["MAX_SCRAPED_PODS", "ClusterMetrics", "MetricsReading", "PodScrape", "Prometheus", "Series", "pod_ready",
           "proxy_path", "query", "read_cluster_metrics", "read_metrics"]
