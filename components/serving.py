"""ServingStack: what a workload cluster runs besides the models.

Charts per cluster: LeaderWorkerSet on the Default stack; Grove and the KAI scheduler
on Dynamo (plus a ModelExpress server and the `modelplane` KAI queue the renderers
label pods with); a DRA driver per device driver its pools' classes name
(dra-example-driver for gpu.example.com on Kind, NVIDIA's for gpu.nvidia.com).
The gateways are separate components (components/gateway.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.k8s import SKIP_AWAIT
from components.labels import k8s_labels


@dataclass(frozen=True)
class ChartSpec:
    name: str
    chart: str
    version: str
    namespace: str
    values: dict = field(default_factory=dict)


LWS = ChartSpec("lws", "oci://registry.k8s.io/lws/charts/lws", "0.10.0", "lws-system")
GROVE = ChartSpec("grove", "oci://ghcr.io/ai-dynamo/grove/grove-charts", "v0.1.0-alpha.11", "grove-system")
KAI = ChartSpec("kai-scheduler", "oci://ghcr.io/nvidia/kai-scheduler/kai-scheduler", "v0.15.2", "kai-scheduler")
DRA_EXAMPLE = "oci://registry.k8s.io/dra-example-driver/charts/dra-example-driver"
DRA_NVIDIA = "oci://registry.k8s.io/dra-driver-nvidia/charts/dra-driver-nvidia-gpu"
MODELEXPRESS_IMAGE = "nvcr.io/nvidia/ai-dynamo/modelexpress-server:0.5.1"
KAI_QUEUE = "modelplane"


def _drivers(cluster: Any, fleet: Any) -> dict[str, int]:
    """Device driver -> the most devices of that driver any pool's node carries."""
    out: dict[str, int] = {}
    for pool in cluster.gpu_pools:
        klass = fleet.classes.get(pool.class_name) if fleet is not None else None
        for device in (klass.spec.devices if klass else []):
            if device.claim == "DRA":
                out[device.driver] = max(out.get(device.driver, 0), device.count)
    return out


def chart_specs(cluster: Any, fleet: Any) -> list[ChartSpec]:
    charts = [GROVE, KAI] if cluster.spec.stack == "Dynamo" else [LWS]
    drivers = _drivers(cluster, fleet)
    if "gpu.example.com" in drivers:
        charts.append(ChartSpec("dra-example-driver", DRA_EXAMPLE, "0.4.0", "dra-example-driver",
                                {"kubeletPlugin": {"numDevices": drivers["gpu.example.com"]}}))
    if "gpu.nvidia.com" in drivers:
        root = "/home/kubernetes/bin/nvidia" if cluster.source == "GKE" else "/"
        charts.append(ChartSpec("dra-driver-nvidia-gpu", DRA_NVIDIA, "0.4.1", "dra-driver-nvidia-gpu",
                                {"gpuResourcesEnabledOverride": True, "nvidiaDriverRoot": root}))
    return charts


def modelexpress_objects(namespace: str) -> list[dict]:
    """The ModelExpress metadata server, where the renderers' `modelexpress-server:8001`
    resolves: in each namespace that runs Dynamo engines."""
    labels = k8s_labels("modelexpress", {"app": "modelexpress-server"})
    meta = {"name": "modelexpress-server", "namespace": namespace, "labels": labels}
    return [
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta, "spec": {
            "replicas": 1, "selector": {"matchLabels": {"app": "modelexpress-server"}},
            "template": {"metadata": {"labels": labels}, "spec": {"containers": [{
                "name": "server", "image": MODELEXPRESS_IMAGE, "ports": [{"containerPort": 8001, "name": "grpc"}]}]}}}},
        {"apiVersion": "v1", "kind": "Service", "metadata": meta, "spec": {
            "selector": {"app": "modelexpress-server"}, "ports": [{"name": "grpc", "port": 8001, "targetPort": 8001}]}},
    ]


class ServingStack(pulumi.ComponentResource):
    """Installs the charts (unless `install_charts` is off: the offline render stack)."""

    ready: list[pulumi.Resource]

    def __init__(self, name: str, cluster: Any, fleet: Any, install_charts: bool,
                 opts: pulumi.ResourceOptions | None = None):
        charts = chart_specs(cluster, fleet)
        props = {"cluster": cluster.metadata.name, "stack": cluster.spec.stack, "installCharts": install_charts,
                 "charts": [{"name": c.name, "chart": c.chart, "version": c.version} for c in charts]}
        super().__init__("modelplane:index:ServingStack", name, props, opts)
        self.ready = []
        if install_charts:
            for spec in charts:
                ns = k8s.core.v1.Namespace(f"{name}-{spec.name}-ns", metadata={
                    "name": spec.namespace, "labels": k8s_labels("serving-stack")}, opts=pulumi.ResourceOptions(parent=self))
                self.ready.append(k8s.helm.v4.Chart(
                    f"{name}-{spec.name}", chart=spec.chart, version=spec.version, namespace=spec.namespace,
                    values=spec.values, opts=pulumi.ResourceOptions(parent=self, depends_on=[ns])))
        if cluster.spec.stack == "Dynamo":
            # Grove's KAI backend rejects pods whose queue does not exist.
            self.ready.append(k8s.apiextensions.CustomResource(
                f"{name}-kai-queue", api_version="scheduling.run.ai/v2", kind="Queue",
                metadata={"name": KAI_QUEUE, "labels": k8s_labels("serving-stack"), "annotations": SKIP_AWAIT},
                spec={"parentQueue": "default-parent-queue",
                      "resources": {r: {"quota": -1, "limit": -1, "overQuotaWeight": 1} for r in ("cpu", "gpu", "memory")}},
                opts=pulumi.ResourceOptions(parent=self, depends_on=list(self.ready))))
        self.register_outputs({"charts": props["charts"]})
