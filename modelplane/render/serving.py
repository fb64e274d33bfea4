"""What a workload cluster runs besides the models: the serving stack's charts, the KAI
queue and the ModelExpress server (semantics §3.6).

Charts per cluster: LeaderWorkerSet on the Default stack; Grove and the KAI scheduler on
Dynamo; a DRA driver per device driver its pools' classes name (dra-example-driver for
gpu.example.com on Kind, NVIDIA's for gpu.nvidia.com, DRANET's aws-dranet for dra.net EFA
devices); the EFA device plugin where a pool declares EFA its class does not claim through
DRA; the cluster-autoscaler on EKS clusters with a pool that can grow. Charts are not
manifests: the Pulumi program installs them (Helm), a GitOps user installs them as listed.
Every chart's source and version is pinned in `CHARTS`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from modelplane.api import Fleet, InferenceCluster
from modelplane.api.kubernetes_versions import AUTOSCALER_DRA_ARGS, autoscaler_image_tag
from modelplane.clouds.aws import (
    AUTOSCALER_NAMESPACE,
    AUTOSCALER_SERVICE_ACCOUNT,
    EfaMode,
    efa_mode,
)
from modelplane.clouds.nvidia import GPU_TOLERATION
from modelplane.json_types import JsonMapping, JsonObject
from modelplane.vocabulary import EXAMPLE_DRIVER, LABEL_EFA, NVIDIA_DRIVER, Manifest

from .meta import KAI_QUEUE, MODELEXPRESS_NAME, MODELEXPRESS_PORT, component_labels, metadata

MODELEXPRESS_IMAGE = "nvcr.io/nvidia/ai-dynamo/modelexpress-server:0.5.1"
# The server refuses to start without a metadata backend ("MX_METADATA_BACKEND is not set or
# invalid. Set it to 'redis' or 'kubernetes'.", ai-dynamo/modelexpress
# modelexpress_server/src/backend_config.rs and registry/state.rs). Redis needs no CRDs.
MODELEXPRESS_BACKEND = "redis"
MODELEXPRESS_REDIS = "modelexpress-redis"
MODELEXPRESS_REDIS_PORT = 6379
MODELEXPRESS_REDIS_IMAGE = "redis:7.4-alpine"
# Pulumi's Kubernetes provider otherwise waits on the Queue's readiness, which a KAI
# Queue never reports; other tools ignore the annotation.
SKIP_AWAIT = {"pulumi.com/skipAwait": "true"}


@dataclass(frozen=True)
class ChartSource:
    """Where a chart comes from and the one version we install: an OCI reference, or a chart
    name in a classic Helm repository."""

    chart: str
    version: str
    repository: str | None = None


# Every chart the serving stack installs, pinned here and nowhere else.
CHARTS: dict[str, ChartSource] = {
    # 0.9.0: the newest LWS whose module the Go proxy serves whole (v0.10.0: .info only, zip 403), so
    # the sim runs the very controller and webhooks this chart installs (scripts/bootstrap-tools).
    "lws": ChartSource("oci://registry.k8s.io/lws/charts/lws", "0.9.0"),
    "grove": ChartSource("oci://ghcr.io/ai-dynamo/grove/grove-charts", "v0.1.0-alpha.11"),
    # The project moved to the kai-scheduler org; its README installs
    # oci://ghcr.io/kai-scheduler/kai-scheduler/kai-scheduler (kai-scheduler/KAI-Scheduler README.md).
    "kai-scheduler": ChartSource("oci://ghcr.io/kai-scheduler/kai-scheduler/kai-scheduler", "v0.15.2"),
    "dra-example-driver": ChartSource("oci://registry.k8s.io/dra-example-driver/charts/dra-example-driver", "0.4.0"),
    "dra-driver-nvidia-gpu": ChartSource("oci://registry.k8s.io/dra-driver-nvidia/charts/dra-driver-nvidia-gpu",
                                         "0.4.1"),
    # aws/eks-charts stable/aws-efa-k8s-device-plugin (versions are spelled with a v).
    "aws-efa-k8s-device-plugin": ChartSource("aws-efa-k8s-device-plugin", "v0.5.30",
                                             "https://aws.github.io/eks-charts"),
    # aws/eks-charts stable/aws-dranet (Chart.yaml version 1.0.0, appVersion v1.2.0-eksbuild.2).
    "aws-dranet": ChartSource("aws-dranet", "1.0.0", "https://aws.github.io/eks-charts"),
    # kubernetes/autoscaler cluster-autoscaler/charts/cluster-autoscaler/Chart.yaml: 9.59.0 ships
    # appVersion 1.35.0; the image is set to the cluster's own minor (modelplane.api.kubernetes_versions).
    "cluster-autoscaler": ChartSource("cluster-autoscaler", "9.59.0", "https://kubernetes.github.io/autoscaler"),
}


@dataclass(frozen=True)
class ChartSpec:
    name: str
    chart: str
    version: str
    namespace: str
    values: JsonMapping = field(default_factory=dict)
    repository: str | None = None
    # Objects the chart's pods need before they are created (applied after the chart's
    # namespace, before the chart): e.g. the ResourceQuota that admits critical pods on GKE.
    pre_objects: tuple[Manifest, ...] = ()


def chart(name: str, namespace: str, values: JsonMapping | None = None,
          pre_objects: tuple[Manifest, ...] = ()) -> ChartSpec:
    source = CHARTS[name]
    return ChartSpec(name, source.chart, source.version, namespace, dict(values or {}), source.repository,
                     pre_objects)


LWS = chart("lws", "lws-system")
GROVE = chart("grove", "grove-system")
KAI = chart("kai-scheduler", "kai-scheduler")
DRA_NVIDIA_NAMESPACE = "dra-driver-nvidia-gpu"
# GKE only admits pods with a system-*-critical priority class outside kube-system in a
# namespace whose ResourceQuota covers those classes ("Consume critical priority classes
# outside kube-system" on GKE; NVIDIA/aicr#921); the NVIDIA DRA driver's kubelet plugin and
# controller use system-node-critical (its chart's values.yaml).
CRITICAL_PRIORITY_CLASSES = ("system-node-critical", "system-cluster-critical")
GKE_NVIDIA_DRIVER_ROOT = "/home/kubernetes/bin/nvidia"


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


def critical_pods_quota(namespace: str) -> Manifest:
    """A ResourceQuota admitting system-*-critical pods in `namespace` (needed on GKE)."""
    return {
        "apiVersion": "v1", "kind": "ResourceQuota",
        "metadata": metadata("critical-pods", component_labels("serving-stack"), namespace),
        # "1k", not "1000": the canonical form the API server (and the render stack's provider)
        # writes back, so both GitOps outputs and a live diff agree.
        "spec": {"hard": {"pods": "1k"}, "scopeSelector": {"matchExpressions": [
            {"operator": "In", "scopeName": "PriorityClass", "values": list(CRITICAL_PRIORITY_CLASSES)}]}},
    }


def gke_driver_installer() -> Manifest:
    """GKE's NVIDIA driver installer DaemonSet for COS nodes whose pools disable automatic
    driver installation, as DRA requires. The installer image ships preloaded on GKE GPU
    nodes and installs into /home/kubernetes/bin/nvidia (the driver root the DRA chart is
    given). Same contract as GoogleCloudPlatform/container-engine-accelerators
    nvidia-driver-installer/cos/daemonset-preloaded-latest.yaml; written here, not copied."""
    labels = component_labels("gpu-driver-installer", {"k8s-app": "nvidia-driver-installer"})
    host = {"dev": "/dev", "nvidia": GKE_NVIDIA_DRIVER_ROOT, "root": "/", "cos-tools": "/var/lib/cos-tools"}
    mounts = {"dev": "/dev", "nvidia": "/usr/local/nvidia", "root": "/root", "cos-tools": "/build/cos-tools"}
    env = {"NVIDIA_INSTALL_DIR_HOST": GKE_NVIDIA_DRIVER_ROOT, "NVIDIA_INSTALL_DIR_CONTAINER": "/usr/local/nvidia",
           "ROOT_MOUNT_DIR": "/root", "COS_TOOLS_DIR_HOST": "/var/lib/cos-tools",
           "COS_TOOLS_DIR_CONTAINER": "/build/cos-tools"}
    return {
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": metadata("nvidia-driver-installer", labels, "kube-system"),
        "spec": {
            "selector": {"matchLabels": {"k8s-app": "nvidia-driver-installer"}},
            "updateStrategy": {"type": "RollingUpdate"},
            "template": {"metadata": {"labels": labels}, "spec": {
                "priorityClassName": "system-node-critical",
                "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [
                        {"key": "cloud.google.com/gke-accelerator", "operator": "Exists"},
                        # Pools with GKE-managed drivers carry this label; ours disable it.
                        {"key": "cloud.google.com/gke-gpu-driver-version", "operator": "DoesNotExist"}]}]}}},
                "tolerations": [{"operator": "Exists"}],
                "hostNetwork": True, "hostPID": True,
                "volumes": [{"name": n, "hostPath": {"path": p}} for n, p in host.items()],
                "initContainers": [{
                    "name": "nvidia-driver-installer", "image": "cos-nvidia-installer:fixed",
                    "imagePullPolicy": "Never", "command": ["/cos-gpu-installer", "install", "--version=latest"],
                    "securityContext": {"privileged": True},
                    "env": [{"name": k, "value": v} for k, v in env.items()],
                    "volumeMounts": [{"name": n, "mountPath": p} for n, p in mounts.items()]}],
                "containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10"}],
            }},
        },
    }


def efa_modes(cluster: InferenceCluster, fleet: Fleet | None) -> set[EfaMode]:
    """How the cluster's pools get EFA: through DRANET, the device plugin, or both."""
    if fleet is None:
        return {"device-plugin"} if any(p.fabric.type == "EFA" for p in cluster.gpu_pools) else set()
    return {mode for p in cluster.gpu_pools if (mode := efa_mode(fleet, p)) is not None}


def efa_charts(cluster: InferenceCluster, fleet: Fleet | None) -> list[ChartSpec]:
    """DRANET for pools whose classes claim EFA as DRA devices, the device plugin for the other
    EFA pools, never both on one node: with both kinds on a cluster, each DaemonSet is pinned to
    its pools' nodes by `modelplane.ai/efa` (which our node groups and the pool labeler set).
    Both tolerate the GPU taint: the plugin's default tolerations are empty (stable/
    aws-efa-k8s-device-plugin/values.yaml) and DRANET's tolerate only CriticalAddonsOnly
    (stable/aws-dranet/templates/daemonset.yaml)."""
    modes = efa_modes(cluster, fleet)
    charts = []
    for mode, name in (("dra", "aws-dranet"), ("device-plugin", "aws-efa-k8s-device-plugin")):
        if mode not in modes:
            continue
        values: JsonObject = {"tolerations": [dict(GPU_TOLERATION)]}
        if len(modes) > 1:
            values["nodeSelector"] = {LABEL_EFA: mode}
        charts.append(chart(name, name, values))
    return charts


def chart_specs(cluster: InferenceCluster, fleet: Fleet | None) -> list[ChartSpec]:
    charts = [GROVE, KAI] if dynamo(cluster) else [LWS]
    drivers = _drivers(cluster, fleet)
    if EXAMPLE_DRIVER in drivers:
        charts.append(chart("dra-example-driver", "dra-example-driver",
                            {"kubeletPlugin": {"numDevices": drivers[EXAMPLE_DRIVER]}}))
    if NVIDIA_DRIVER in drivers:
        gke = cluster.source == "GKE"
        pre = (critical_pods_quota(DRA_NVIDIA_NAMESPACE),) + ((gke_driver_installer(),) if gke else ())
        # The kubelet plugin's default node affinity is kept: our EKS/GKE pools carry
        # nvidia.com/gpu.present=true (modelplane.clouds.nodes), which satisfies it.
        charts.append(chart("dra-driver-nvidia-gpu", DRA_NVIDIA_NAMESPACE, {
            "gpuResourcesEnabledOverride": True,
            "nvidiaDriverRoot": GKE_NVIDIA_DRIVER_ROOT if gke else "/",
            "resources": {"computeDomains": {"enabled": False}}}, pre))
    return charts + efa_charts(cluster, fleet) + autoscaler_charts(cluster)


def autoscaler_charts(cluster: InferenceCluster) -> list[ChartSpec]:
    """The cluster-autoscaler on an EKS cluster with a pool that can grow: the scheduler counts
    such a pool's maxNodeCount, and without an autoscaler its node group never leaves nodeCount.
    It discovers exactly those pools' Auto Scaling groups by the tags the EKS source puts on them
    (modelplane.clouds.aws.autoscaler_discovery_tags) and acts through a Pod Identity role bound
    to its service account. Since 1.35 it handles DRA claims by default (FAQ.md:
    `enable-dynamic-resource-allocation`, "locked to true for 1.35+"), using a node of the group
    as the template, so it cannot scale a DRA pool up from zero (kubernetes/autoscaler#345: keep
    minNodeCount >= 1; the `eks-autoscale-from-zero` check says so)."""
    eks = cluster.spec.cluster.eks
    if eks is None or not cluster.autoscaled_pools:
        return []
    return [chart("cluster-autoscaler", AUTOSCALER_NAMESPACE, {
        "cloudProvider": "aws",
        "awsRegion": eks.region,
        # The logical name; the program binds the cloud's own (bind_eks_cluster_name).
        "autoDiscovery": {"clusterName": cluster.metadata.name},
        "rbac": {"serviceAccount": {"name": AUTOSCALER_SERVICE_ACCOUNT}},
        # The autoscaler of the cluster's own minor (modelplane.api.kubernetes_versions).
        "image": {"tag": autoscaler_image_tag(cluster)},
        "extraArgs": dict(AUTOSCALER_DRA_ARGS),
    })]


def bind_eks_cluster_name(charts: Sequence[ChartSpec], cluster_name: object) -> tuple[ChartSpec, ...]:
    """The charts with the cluster-autoscaler's `autoDiscovery.clusterName` set to the EKS cluster's
    physical name, `cluster_name` (a Pulumi Output in the program): Pulumi suffixes the logical name
    (`<name>-1a2b3c4`), the EKS source tags the Auto Scaling groups with that physical name
    (components/sources/eks.py), and the chart discovers exactly the groups tagged
    `k8s.io/cluster-autoscaler/<clusterName>`. With the logical name, two stacks declaring the same
    InferenceCluster name in one account and region would resize each other's node groups."""
    out = []
    for spec in charts:
        if spec.name == "cluster-autoscaler":
            discovery = {**dict(spec.values.get("autoDiscovery") or {}), "clusterName": cluster_name}
            spec = replace(spec, values={**spec.values, "autoDiscovery": discovery})
        out.append(spec)
    return tuple(out)


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
    redis_labels = component_labels("modelexpress", {"app": MODELEXPRESS_REDIS})
    redis_meta = metadata(MODELEXPRESS_REDIS, redis_labels, namespace)
    env = [{"name": "MX_METADATA_BACKEND", "value": MODELEXPRESS_BACKEND},
           {"name": "REDIS_URL", "value": f"redis://{MODELEXPRESS_REDIS}:{MODELEXPRESS_REDIS_PORT}"}]
    return [
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta, "spec": {
            "replicas": 1, "selector": {"matchLabels": selector},
            "template": {"metadata": {"labels": labels}, "spec": {"containers": [{
                "name": "server", "image": MODELEXPRESS_IMAGE, "env": env,
                "ports": [{"containerPort": MODELEXPRESS_PORT, "name": "grpc"}]}]}}}},
        {"apiVersion": "v1", "kind": "Service", "metadata": meta, "spec": {
            "selector": selector,
            "ports": [{"name": "grpc", "port": MODELEXPRESS_PORT, "targetPort": MODELEXPRESS_PORT}]}},
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": redis_meta, "spec": {
            "replicas": 1, "selector": {"matchLabels": {"app": MODELEXPRESS_REDIS}},
            "template": {"metadata": {"labels": redis_labels}, "spec": {"containers": [{
                "name": "redis", "image": MODELEXPRESS_REDIS_IMAGE,
                "ports": [{"containerPort": MODELEXPRESS_REDIS_PORT, "name": "redis"}]}]}}}},
        {"apiVersion": "v1", "kind": "Service", "metadata": redis_meta, "spec": {
            "selector": {"app": MODELEXPRESS_REDIS},
            "ports": [{"name": "redis", "port": MODELEXPRESS_REDIS_PORT, "targetPort": MODELEXPRESS_REDIS_PORT}]}},
    ]
