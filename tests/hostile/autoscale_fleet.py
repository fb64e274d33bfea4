"""A fleet whose engine pods answer hostile /metrics through the hostile API server: an honest
cluster and a hostile one, each replica's pod listed there and its /metrics served per path
(`server.fuzz`), and the provider's `observe` and `autoscale` inputs to read them. Shared by
tests/hostile/test_autoscale_items.py and benchmarks/autoscale_hostile.py."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from modelplane.api import load_documents
from modelplane.autoscale.pod_metrics import proxy_path
from modelplane.scheduler import FleetPlacement, place_fleet
from tests import manifests as g
from tests.hostile.conftest import kubeconfig
from tests.hostile.server import HostileServer, Objects
from tests.unit.observe.objects import cluster_objects, our_pod

NS = "ml"
HONEST = "honest"
HOSTILE = "hostile"
# Each cluster's hostile-server mode: the lists honest, each pod's /metrics `server.fuzz[its path]`.
MODES = {HONEST: "metrics-fuzz.honest", HOSTILE: "metrics-fuzz.hostile"}
NOW = 1_800_000_000.0

Body = bytes | str           # a /metrics body, or the name of the server mode that answers it


def documents(honest_pods: int, hostile_pods: int, *, ttft: bool = True) -> list[dict[str, Any]]:
    metrics = [g.metric("QueueDepth", 1)] + ([g.metric("TimeToFirstToken", 2.0, percentile=90)] if ttft else [])
    total = honest_pods + hostile_pods
    return [g.gpu_class("g1", 1), g.cluster(HONEST, g.pool("gpu", "g1", honest_pods)),
            g.cluster(HOSTILE, g.pool("gpu", "g1", hostile_pods)), g.deployment("chat", total, namespace=NS),
            g.replica_autoscaler("chat", "chat", 2 * total, *metrics, namespace=NS)]


def serve(server: HostileServer, docs: list[dict[str, Any]], body: Callable[[str, int], Body],
          ready: Callable[[str, int], bool] = lambda cluster, i: True) -> FleetPlacement:
    """Every replica's pod on the server (body(cluster, i) its /metrics, i counting the replicas
    of the fleet in order); the placement, as the provider's state holds it."""
    fleet = load_documents(docs)
    placement = place_fleet(fleet)
    pods: dict[str, list[dict[str, Any]]] = {HONEST: [], HOSTILE: []}
    for i, r in enumerate(placement.find(NS, "chat").replicas):
        name = f"{r.name}-pod"
        pods[r.cluster].append(our_pod(NS, name, "chat", r.cluster, r.index, ready=ready(r.cluster, i)))
        server.fuzz[proxy_path(NS, name)] = body(r.cluster, i)
    for cluster in (HONEST, HOSTILE):
        server.objects[MODES[cluster]] = Objects(*cluster_objects(fleet, cluster), pods=pods[cluster])
    return placement


def news(server: HostileServer, directory: Path, docs: list[dict[str, Any]], timeout: float,
         ttft_window: float = 0.0, **autoscale: Any) -> dict[str, Any]:
    """The placement resource's inputs: the fleet, both clusters observed, autoscaling on."""
    directory.mkdir(parents=True, exist_ok=True)
    configs = {c: str(kubeconfig(directory / f"{c}.yaml", server.url(mode))) for c, mode in MODES.items()}
    return {"fleet": docs, "accounting": "Device", "observe": {"kubeconfigs": configs, "timeoutSeconds": timeout},
            "autoscale": {"timeoutSeconds": timeout, "ttftWindowSeconds": ttft_window, **autoscale}}
