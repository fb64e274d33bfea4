"""The replica's serving Service on its workload cluster (our divergence from §3.5).

The reference fronts a replica with a GAIE InferencePool and an endpoint picker; the
Traefik workload gateway implements neither, so each replica gets a plain ClusterIP
Service named after the replica that the gateway routes to.
"""

from __future__ import annotations

from modelplane.vocabulary import ENGINE_PORT, LABEL_PD_ROLE, LABEL_SERVING, Manifest

from .context import ReplicaContext
from .meta import metadata
from .names import serving_service_name
from .pd_router import pd_family, router_selector


def serving_url(namespace: str, replica: str) -> str:
    """Where a replica's engines answer inside its cluster: its serving Service."""
    return f"http://{serving_service_name(replica)}.{namespace}.svc.cluster.local:{ENGINE_PORT}"


def render_serving_service(r: ReplicaContext) -> Manifest:
    selector = {LABEL_SERVING: r.name}
    if pd_family(r) is not None:
        # The P/D router sends each request to a prefill and a decode server (render.pd_router).
        selector = router_selector(r)
    elif r.prefill_decode:
        # Engines of no known family: decode pods answer whole requests (prefilling locally).
        selector[LABEL_PD_ROLE] = "decode"
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata(serving_service_name(r.name), r.labels, r.namespace),
        "spec": {
            "type": "ClusterIP",
            "selector": selector,
            "ports": [{"name": "http", "port": ENGINE_PORT, "targetPort": ENGINE_PORT, "protocol": "TCP"}],
        },
    }
