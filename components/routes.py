"""Fleet + placement -> the routes both gateway hops serve (pure; no Pulumi).

Every placed replica is an endpoint (reference §4.1 labels); hand-written
ModelEndpoints join them. Readiness is not known to the program: every endpoint is
routed, and the gateways' health checks take a dead one out at run time.
"""

from __future__ import annotations

from typing import Any, Mapping

ENGINE_PORT = 8000


def replica_url(namespace: str, replica: str) -> str:
    # The renderers name each replica's serving Service after the replica.
    return f"http://{replica}.{namespace}.svc.cluster.local:{ENGINE_PORT}"


def fleet_endpoints(fleet: Any, placement: Mapping[str, Any]) -> list:
    from modelplane.routing import endpoint_from_api, replica_endpoint

    endpoints = []
    for dep in placement.get("deployments", []):
        deployment = fleet.deployments.get((dep["namespace"], dep["name"]))
        if deployment is None:
            continue
        template = deployment.spec.template.metadata
        labels = dict(template.labels or {}) if template is not None else {}
        for rep in dep.get("replicas", []):
            endpoints.append(replica_endpoint(dep["namespace"], rep["name"], dep["name"], rep["cluster"],
                                              int(rep["index"]), labels, url=replica_url(dep["namespace"], rep["name"])))
    endpoints += [endpoint_from_api(ep) for _, ep in sorted(fleet.endpoints.items())]
    return endpoints



def service_routes(fleet: Any, placement: Mapping[str, Any]) -> list:
    from modelplane.gateway.config import ServiceRoute
    from modelplane.routing import service_weights

    endpoints = fleet_endpoints(fleet, placement)
    routes = []
    for (ns, name), service in sorted(fleet.services.items()):
        routes.append(ServiceRoute(ns, name, tuple(service_weights(service, endpoints))))
    return routes


def weights_summary(route) -> list[dict]:
    """Per-endpoint weights of one service, as a stack output."""
    return [{"endpoint": f"{b.endpoint.namespace}/{b.endpoint.name}", "entry": b.entry, "weight": b.weight,
             "priority": b.priority, "cluster": b.endpoint.cluster or "external"} for b in route.backends]
