"""From a fleet and its placement to routes: the pure glue the cluster plan
(modelplane.plan, for the Pulumi program and `render`) and the local demo use
(manifests -> endpoints -> per-service weighted backends)."""
from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

from modelplane.api import Fleet
from modelplane.gateway.config import ServiceRoute
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
        routes.append(ServiceRoute(ns, name, tuple(backends)))
    return routes


def route_weights(route: ServiceRoute) -> list[dict[str, Any]]:
    """Per-endpoint weights of one service, as people read them (a stack output)."""
    return [{"endpoint": f"{b.endpoint.namespace}/{b.endpoint.name}", "entry": b.entry, "weight": b.weight,
             "priority": b.priority, "cluster": b.endpoint.cluster or "external"} for b in route.backends]
