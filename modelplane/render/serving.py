"""What a workload cluster runs besides the models: the serving stack's charts, the KAI
queue and the ModelExpress server (semantics §3.6).

Charts per cluster: LeaderWorkerSet on the Default stack; Grove and the KAI scheduler on
Dynamo; a DRA driver per device driver its pools' classes name (dra-example-driver for
gpu.example.com on Kind, NVIDIA's for gpu.nvidia.com). Charts are not manifests: the
Pulumi program installs them (Helm), a GitOps user installs them as listed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from modelplane.api import Fleet, InferenceCluster

from .meta import KAI_QUEUE, MODELEXPRESS_NAME, MODELEXPRESS_PORT, Manifest, component_labels, metadata

MODELEXPRESS_IMAGE = "nvcr.io/nvidia/ai-dynamo/modelexpress-server:0.5.1"
# Pulumi's Kubernetes provider otherwise waits on the Queue's readiness, which a KAI
# Queue never reports; other tools ignore the annotation.
SKIP_AWAIT = {"pulumi.com/skipAwait": "true"}
DRA_EXAMPLE_DRIVER = "gpu.example.com"
DRA_NVIDIA_DRIVER = "gpu.nvidia.com"


@dataclass(frozen=True)
class ChartSpec:
    name: str
    chart: str
    version: str
    namespace: str
    values: Mapping[str, Any] = field(default_factory=dict)


LWS = ChartSpec("lws", "oci://registry.k8s.io/lws/charts/lws", "0.10.0", "lws-system")
GROVE = ChartSpec("grove", "oci://ghcr.io/ai-dynamo/grove/grove-charts", "v0.1.0-alpha.11", "grove-system")
KAI = ChartSpec("kai-scheduler", "oci://ghcr.io/nvidia/kai-scheduler/kai-scheduler", "v0.15.2", "kai-scheduler")
DRA_EXAMPLE = "oci://registry.k8s.io/dra-example-driver/charts/dra-example-driver"
DRA_NVIDIA = "oci://registry.k8s.io/dra-driver-nvidia/charts/dra-driver-nvidia-gpu"


def dynamo(cluster: InferenceCluster) -> bool:
    return cluster.spec.stack == "Dynamo"


def _drivers(cluster: InferenceCluster, fleet: Fleet | None) -> dict[str, int]:
    """Device driver -> the most devices of that driver any pool's node carries."""
    out: dict[str, int] = {}
    for pool in cluster.gpu_pools:
        klass = fleet.classes.get(pool.class_name or "") if fleet is not None else None
        for device in (klass.spec.devices if klass else []):
            if device.claim == "DRA":
                out[device.driver] = max(out.get(device.driver, 0), device.count)
    return out


def chart_specs(cluster: InferenceCluster, fleet: Fleet | None) -> list[ChartSpec]:
    charts = [GROVE, KAI] if dynamo(cluster) else [LWS]
    drivers = _drivers(cluster, fleet)
    if DRA_EXAMPLE_DRIVER in drivers:
        charts.append(ChartSpec("dra-example-driver", DRA_EXAMPLE, "0.4.0", "dra-example-driver",
                                {"kubeletPlugin": {"numDevices": drivers[DRA_EXAMPLE_DRIVER]}}))
    if DRA_NVIDIA_DRIVER in drivers:
        root = "/home/kubernetes/bin/nvidia" if cluster.source == "GKE" else "/"
        charts.append(ChartSpec("dra-driver-nvidia-gpu", DRA_NVIDIA, "0.4.1", "dra-driver-nvidia-gpu",
                                {"gpuResourcesEnabledOverride": True, "nvidiaDriverRoot": root}))
    return charts


def render_kai_queue() -> Manifest:
    """The `modelplane` KAI queue the renderers label Grove pods with: Grove's KAI backend
    rejects pods whose queue does not exist."""
    return {
        "apiVersion": "scheduling.run.ai/v2", "kind": "Queue",
        "metadata": metadata(KAI_QUEUE, component_labels("serving-stack"), annotations=SKIP_AWAIT),
        "spec": {"parentQueue": "default-parent-queue",
                 "resources": {r: {"quota": -1, "limit": -1, "overQuotaWeight": 1} for r in ("cpu", "gpu", "memory")}},
    }


def render_modelexpress(namespace: str) -> list[Manifest]:
    """The ModelExpress metadata server, where the renderers' `modelexpress-server:8001`
    resolves: in each namespace that runs Dynamo engines."""
    labels = component_labels("modelexpress", {"app": MODELEXPRESS_NAME})
    meta = metadata(MODELEXPRESS_NAME, labels, namespace)
    selector = {"app": MODELEXPRESS_NAME}
    return [
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta, "spec": {
            "replicas": 1, "selector": {"matchLabels": selector},
            "template": {"metadata": {"labels": labels}, "spec": {"containers": [{
                "name": "server", "image": MODELEXPRESS_IMAGE,
                "ports": [{"containerPort": MODELEXPRESS_PORT, "name": "grpc"}]}]}}}},
        {"apiVersion": "v1", "kind": "Service", "metadata": meta, "spec": {
            "selector": selector,
            "ports": [{"name": "grpc", "port": MODELEXPRESS_PORT, "targetPort": MODELEXPRESS_PORT}]}},
    ]
