"""From a fleet and its placement to routes: the pure glue the cluster plan
(modelplane.plan, for the Pulumi program and `render`) and the local demo use
(manifests -> endpoints -> per-service weighted backends).

Replicas leaving (scale-in: `leaving_routes`) get no new request, but keep answering the
ones already sent to them: the control plane stops routing to them at once; a workload
gateway keeps a leaving replica only while it has no other replica of that service, so a
request the control plane sent before it reloaded still finds a backend there, whichever
gateway reloads first. The same rule for the Pulumi stacks (modelplane.plan) and the local
fleet."""
from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import replace

from modelplane.api import Fleet
from modelplane.gateway.config import ServiceRoute
from modelplane.json_types import JsonObject
from modelplane.routing import (
    Endpoint,
    compute_weights,
    endpoint_from_api,
    replica_endpoint,
    route_entries,
    serving_capacity,
)
from modelplane.scheduler import FleetPlacement

EngineUrl = Callable[[str, str, str], str]  # (namespace, replica, cluster) -> engine base URL


def placement_endpoints(fleet: Fleet, placement: FleetPlacement, engine_url: EngineUrl | None = None) -> list[Endpoint]:
    """One endpoint per placed replica (reference §4.1 labels) plus hand-written ones.

    Readiness is not known at plan time; every placed replica is taken as ready and
    the gateways' health checks decide at run time.
    """
    out: list[Endpoint] = []
    for dp in placement.deployments:
        dep = fleet.deployments.get((dp.namespace, dp.name))
        template = dep.spec.template.metadata if dep is not None else None
        labels = dict(template.labels or {}) if template is not None else {}
        capacity = serving_capacity(dep) if dep is not None else 1
        for r in dp.replicas:
            url = engine_url(dp.namespace, r.name, r.cluster) if engine_url else ""
            out.append(replica_endpoint(dp.namespace, r.name, dp.name, r.cluster, r.index, labels, url,
                                        capacity=capacity))
    out.extend(endpoint_from_api(e) for _, e in sorted(fleet.endpoints.items()))
    return out


def fleet_routes(fleet: Fleet, endpoints: list[Endpoint],
                 reachable_clusters: Iterable[str] | None = None) -> list[ServiceRoute]:
    """Every ModelService of the fleet with its weighted backends (semantics §4.3).

    With `reachable_clusters`, replicas on any other cluster (no gateway address yet)
    count as not ready, as the reference withholds their endpoints: they take no share
    and their entry's share goes to the others.
    """
    if reachable_clusters is not None:
        ok = set(reachable_clusters)
        endpoints = [ep if ep.external or ep.cluster in ok else replace(ep, ready=False) for ep in endpoints]
    routes = []
    for (ns, name), svc in sorted(fleet.services.items()):
        backends = compute_weights(route_entries(svc), endpoints, namespace=ns)
        routes.append(ServiceRoute(ns, name, tuple(backends), cache_aware=svc.spec.cache_aware))
    return routes


Key = tuple[str, str]   # (namespace, replica name): Endpoint.key


def leaving_routes(fleet: Fleet, endpoints: list[Endpoint], leaving: Collection[Key],
                   reachable_clusters: Iterable[str] | None = None) -> tuple[list[ServiceRoute], list[ServiceRoute]]:
    """(the control plane's routes, the workload gateways' routes) while the replicas in
    `leaving` drain: no share for them at the control plane; at a workload gateway, a
    leaving replica stays where it is the cluster's last backend of the service."""
    reachable = list(reachable_clusters) if reachable_clusters is not None else None
    going = set(leaving)
    serving = fleet_routes(fleet, [replace(ep, ready=False) if ep.key in going else ep for ep in endpoints], reachable)
    if not going:
        return serving, serving
    routed = fleet_routes(fleet, endpoints, reachable)
    return serving, workload_routes(routed, serving, going)


def workload_routes(routed: Sequence[ServiceRoute], serving: Sequence[ServiceRoute],
                    leaving: Collection[Key]) -> list[ServiceRoute]:
    """`serving` (the routes without the leaving replicas), plus each leaving backend of
    `routed` (the routes with them) on a cluster left without any other backend of its
    service: the workload gateways' routes while replicas drain."""
    before = {(r.namespace, r.name): r for r in routed}
    out = []
    for route in serving:
        kept = {b.endpoint.cluster for b in route.backends}
        old = before.get((route.namespace, route.name))
        extra = [b for b in (old.backends if old is not None else ())
                 if b.endpoint.key in leaving and b.endpoint.cluster not in kept]
        out.append(replace(route, backends=(*route.backends, *extra)) if extra else route)
    return out


def route_weights(route: ServiceRoute) -> list[JsonObject]:
    """Per-endpoint weights of one service, as people read them (a stack output)."""
    return [{"endpoint": f"{b.endpoint.namespace}/{b.endpoint.name}", "entry": b.entry, "weight": b.weight,
             "priority": b.priority, "cluster": b.endpoint.cluster or "external"} for b in route.backends]
