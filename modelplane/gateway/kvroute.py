"""The kvroute plugin (gateway-plugins/src/modelplane.local/kvroute) as configuration fragments:
the one home of its name, its Go module and the middlewares the two hops route a
`balancing: CacheAware` ModelService through (pure, plain dicts; docs/kv-routing.md).

* Workload gateway: the plugin in its replica mode over the cluster's local replicas of the
  service (after the service prefix is stripped). It picks a replica by prefix overlap and load
  and answers `GET SUMMARY_PATH` (below the service's prefix) with the cluster's summary.
* Control plane: the plugin in its cluster mode over the clusters holding the service, each
  weighted with the weight the plan gives that cluster's child of the weighted round robin
  (`routing.cluster_weights`, so a 90/10 canary over two clusters keeps 90/10 shares). It reads
  each cluster's summary at `<gateway>/<ns>/<svc>/kvroute/summary` and forwards the request to
  `<gateway>/<ns>/<svc>/...`; with mutual TLS between the hops it dials over HTTPS with the hop
  CA and the control plane's client certificate (`tls`), verifying each gateway's name.

The plugin is terminal on both hops: it forwards the request itself and never calls the next
handler, so a router's chain ends with it and its `service` (noop@internal) is never reached.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

from modelplane.json_types import JsonObject
from modelplane.routing import WeightedBackend, cluster_weights

KV_PLUGIN = "modelplane-kvroute"                # the plugin's name in Traefik's static configuration
KV_PLUGIN_MODULE = "modelplane.local/kvroute"   # its Go module, under plugins-local/src/
SUMMARY_PATH = "/kvroute/summary"               # the plugin's default, below the service's prefix
TERMINAL_SERVICE = "noop@internal"              # a router needs a service; kvroute never reaches it

Config = JsonObject


def cache_aware_problem(namespace: str, name: str, backends: Sequence[WeightedBackend]) -> str | None:
    """Why the plugin cannot route a service's backends (all of them: the control plane's route)
    as the plan weighs them, or None.

    The plugin routes placed replicas only (a hand-written endpoint has no workload gateway to
    publish a summary), and weighs clusters, not replicas: inside one cluster it picks by cache
    and load. So the entries with replicas on one cluster must give each replica the same share
    (an entry's share over its replicas; `weighting: Capacity` is refused by the API): two
    deployments of a 90/10 canary sharing a cluster would not get 90/10 there."""
    for b in backends:
        if b.endpoint.external:
            return (f"ModelService {namespace}/{name}: balancing CacheAware routes placed replicas only, and "
                    f"endpoint {b.endpoint.namespace}/{b.endpoint.name} is a hand-written (external) one; "
                    "select replicas only, or use balancing: RoundRobin")
    total: dict[str, int] = {}
    count: dict[str, int] = {}
    for b in backends:
        total[b.entry] = total.get(b.entry, 0) + b.weight
        count[b.entry] = count.get(b.entry, 0) + 1
    by_cluster: dict[str, set[str]] = {}
    for b in backends:
        if b.endpoint.cluster is not None:
            by_cluster.setdefault(b.endpoint.cluster, set()).add(b.entry)
    for cluster, entries in sorted(by_cluster.items()):
        first, *others = sorted(entries)
        for other in others:
            if total[first] * count[other] != total[other] * count[first]:
                return (f"ModelService {namespace}/{name}: balancing CacheAware weighs clusters, not replicas, but "
                        f"cluster {cluster} holds replicas of entry {first} (weight {total[first]} over "
                        f"{count[first]}) and of entry {other} (weight {total[other]} over {count[other]}), "
                        "which the plan gives unequal shares; put the entries' deployments on different clusters, "
                        "or use balancing: RoundRobin")
    return None


def check_cache_aware(namespace: str, name: str, backends: Sequence[WeightedBackend]) -> None:
    problem = cache_aware_problem(namespace, name, backends)
    if problem is not None:
        raise ValueError(problem)


def workload_middleware(cluster: str, backends: Sequence[WeightedBackend]) -> Config:
    """The replica mode over one cluster's local backends of a service (equal shares: checked on the
    whole route, at the control plane's configuration)."""
    replicas = sorted({b.endpoint.url for b in backends})
    return {"plugin": {KV_PLUGIN: {"replicas": replicas, "cluster": cluster}}}


def control_middleware(prefix: str, backends: Sequence[WeightedBackend], gateway_urls: Mapping[str, str],
                       tls: Config | None = None, server_names: Mapping[str, str] | None = None) -> Config:
    """The cluster mode over the clusters of a service's backends. `gateway_urls`: cluster -> the
    base URL the control plane dials its gateway at (https when `tls`); `tls`: the hop's files
    (caFile, certFile, keyFile); `server_names`: cluster -> the name its certificate is verified for."""
    clusters = []
    for cluster, weight in cluster_weights(backends).items():
        c: Config = {"name": cluster, "url": gateway_urls[cluster].rstrip("/") + prefix, "weight": weight}
        if tls is not None and server_names is not None:
            c["serverName"] = server_names[cluster]
        clusters.append(c)
    cfg: Config = {"clusters": clusters}
    if tls is not None:
        cfg["tls"] = tls
    return {"plugin": {KV_PLUGIN: cfg}}


def kvroute_static() -> Config:
    """The static `localPlugins` entry that loads kvroute from ./plugins-local/src/."""
    return {KV_PLUGIN: {"moduleName": KV_PLUGIN_MODULE}}
