"""The replica's serving Service on its workload cluster (our divergence from §3.5).

The reference fronts a replica with a GAIE InferencePool and an endpoint picker; the
Traefik workload gateway implements neither, so each replica gets a plain ClusterIP
Service named after the replica that the gateway routes to.
"""

from __future__ import annotations

from .context import ReplicaContext
from .meta import ENGINE_PORT, LABEL_PD_ROLE, LABEL_SERVING, Manifest, metadata
from .names import serving_service_name


def serving_url(namespace: str, replica: str) -> str:
    """Where a replica's engines answer inside its cluster: its serving Service."""
    return f"http://{serving_service_name(replica)}.{namespace}.svc.cluster.local:{ENGINE_PORT}"


def render_serving_service(r: ReplicaContext) -> Manifest:
    selector = {LABEL_SERVING: r.name}
    if r.prefill_decode:
        # Without a P/D-aware picker the decode pods answer whole requests.
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
