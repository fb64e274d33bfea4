"""Contract tests: each upstream rule a real EKS/GKE cluster enforces on what we render, named
after the rule, its source in the docstring."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from modelplane.clouds.nodes import (
    DRA_KUBELET_PLUGIN_NODE_SELECTOR_TERMS,
    node_affinity_matches,
    provisioned_node_labels,
    provisioned_node_taints,
)
from modelplane.render import render_replica
from modelplane.render.names import LWS_NAME_BUDGET, REVISION_HASH_SUFFIX
from modelplane.render.serving import CHARTS, chart_specs, render_modelexpress

from .cloudfleet import GPU_CEL, cloud_fleet
from .fleets import by_kind, one, place

ROOT = Path(__file__).resolve().parents[3]


def _charts(cluster: str) -> dict[str, object]:
    fl = cloud_fleet()
    return {c.name: c for c in chart_specs(fl.clusters[cluster], fl)}


@pytest.mark.parametrize("cluster", ["eks-a", "gke-b"])
def test_nvidia_dra_kubelet_plugin_node_affinity_matches_our_gpu_node_pool_labels(cluster: str) -> None:
    """kubernetes-sigs/dra-driver-nvidia-gpu deployments/helm/dra-driver-nvidia-gpu/values.yaml:
    `kubeletPlugin.affinity` requires an NFD NVIDIA PCI/CPU label or `nvidia.com/gpu.present=true`;
    without a match no kubelet plugin runs and no ResourceSlice (no GPU) is published. Neither
    EKS nor GKE sets those labels, so our pools must, and the chart must keep that affinity."""
    fl = cloud_fleet()
    spec = fl.clusters[cluster]
    for pool in spec.gpu_pools:
        labels = provisioned_node_labels(fl, spec, pool)
        assert node_affinity_matches(DRA_KUBELET_PLUGIN_NODE_SELECTOR_TERMS, labels), (pool.name, labels)
        # and a node without them (what EKS/GKE give by themselves) would not run the plugin
        assert not node_affinity_matches(DRA_KUBELET_PLUGIN_NODE_SELECTOR_TERMS, {"modelplane.ai/pool": pool.name})
    values = _charts(cluster)["dra-driver-nvidia-gpu"].values  # type: ignore[attr-defined]
    assert "affinity" not in values.get("kubeletPlugin", {}) and values["gpuResourcesEnabledOverride"] is True


def test_gke_dra_pools_opt_out_of_the_default_gpu_device_plugin() -> None:
    """https://cloud.google.com/kubernetes-engine/docs/how-to/set-up-dra: DRA GPU node pools must
    disable automatic driver installation and carry `gke-no-default-nvidia-gpu-device-plugin=true`."""
    fl = cloud_fleet()
    spec = fl.clusters["gke-b"]
    labels = provisioned_node_labels(fl, spec, spec.gpu_pools[0])
    assert labels["gke-no-default-nvidia-gpu-device-plugin"] == "true"
    eks = fl.clusters["eks-a"]
    assert "gke-no-default-nvidia-gpu-device-plugin" not in provisioned_node_labels(fl, eks, eks.gpu_pools[0])


def test_gke_dra_drivers_are_installed_by_a_daemonset_into_the_driver_root_the_dra_chart_reads() -> None:
    """set-up-dra (GKE): automatic GPU driver installation is not supported with DRA; drivers are
    installed by GKE's COS installer DaemonSet into /home/kubernetes/bin/nvidia
    (GoogleCloudPlatform/container-engine-accelerators nvidia-driver-installer/cos/
    daemonset-preloaded-latest.yaml), the `nvidiaDriverRoot` the DRA chart must be given."""
    spec = _charts("gke-b")["dra-driver-nvidia-gpu"]
    [installer] = [o for o in spec.pre_objects if o["kind"] == "DaemonSet"]  # type: ignore[attr-defined]
    pod = installer["spec"]["template"]["spec"]
    assert {"name": "nvidia", "hostPath": {"path": spec.values["nvidiaDriverRoot"]}} in pod["volumes"]  # type: ignore[attr-defined]
    assert spec.values["nvidiaDriverRoot"] == "/home/kubernetes/bin/nvidia"  # type: ignore[attr-defined]
    assert pod["initContainers"][0]["command"][:2] == ["/cos-gpu-installer", "install"]
    assert not [o for o in _charts("eks-a")["dra-driver-nvidia-gpu"].pre_objects  # type: ignore[attr-defined]
                if o["kind"] == "DaemonSet"]


def test_gke_admits_critical_priority_pods_outside_kube_system_only_with_a_matching_resource_quota() -> None:
    """GKE ships a kube-system quota scoped to system-*-critical, so such pods elsewhere need a
    ResourceQuota whose PriorityClass scope lists their class (NVIDIA/aicr#921; the reference
    ServingStack composes the same quota). The DRA chart's pods use system-node-critical
    (dra-driver-nvidia-gpu values.yaml `kubeletPlugin.priorityClassName`)."""
    spec = _charts("gke-b")["dra-driver-nvidia-gpu"]
    [quota] = [o for o in spec.pre_objects if o["kind"] == "ResourceQuota"]  # type: ignore[attr-defined]
    assert quota["metadata"]["namespace"] == spec.namespace  # type: ignore[attr-defined]
    [scope] = quota["spec"]["scopeSelector"]["matchExpressions"]
    assert scope["scopeName"] == "PriorityClass" and scope["operator"] == "In"
    assert "system-node-critical" in scope["values"]


def test_efa_device_plugin_tolerates_the_gpu_taint_of_our_node_groups() -> None:
    """aws/eks-charts stable/aws-efa-k8s-device-plugin/values.yaml: `tolerations: []` by default;
    our EKS GPU node groups are tainted nvidia.com/gpu:NoSchedule, so without a toleration the
    plugin never runs on the nodes whose EFA devices it must publish."""
    fl = cloud_fleet()
    spec = fl.clusters["eks-a"]
    plugin = _charts("eks-a")["aws-efa-k8s-device-plugin"]
    for taint in provisioned_node_taints(spec, spec.gpu_pools[0]):
        assert any(t["key"] == taint["key"] and t["effect"] == taint["effect"] and t["operator"] == "Exists"
                   for t in plugin.values["tolerations"])  # type: ignore[attr-defined]
    assert "aws-efa-k8s-device-plugin" not in _charts("gke-b")


def test_efa_devices_reach_pods_only_through_vpc_amazonaws_com_efa_requests() -> None:
    """https://docs.aws.amazon.com/eks/latest/userguide/device-management-efa.html: the EFA device
    plugin publishes `vpc.amazonaws.com/efa` and pods get EFA devices only by requesting it. A
    whole-node member takes all 32 interfaces of a p5.48xlarge, a quarter node a quarter."""
    fl = cloud_fleet()
    gang = render_replica(fl, fl.deployments[("ml-team", "gang")],
                          place(fl, "ml-team", "gang", "eks-a", pools={"vllm": ("efa", "efa")}), "eks-a")
    lws = one(gang, "LeaderWorkerSet")["spec"]["leaderWorkerTemplate"]
    for template in (lws["leaderTemplate"], lws["workerTemplate"]):
        resources = template["spec"]["containers"][0]["resources"]
        assert resources["limits"]["vpc.amazonaws.com/efa"] == 32 == resources["requests"]["vpc.amazonaws.com/efa"]
    half = render_replica(fl, fl.deployments[("ml-team", "half")],
                          place(fl, "ml-team", "half", "eks-a", pools={"vllm": ("efa",)}), "eks-a")
    resources = one(half, "Deployment")["spec"]["template"]["spec"]["containers"][0]["resources"]
    assert resources["limits"]["vpc.amazonaws.com/efa"] == 8
    off = render_replica(fl, fl.deployments[("ml-team", "half")],
                         place(fl, "ml-team", "half", "eks-a", pools={"vllm": ("block",)}), "eks-a")
    assert "limits" not in one(off, "Deployment")["spec"]["template"]["spec"]["containers"][0]["resources"]


def test_lws_worker_controller_revision_hash_label_stays_within_63_characters() -> None:
    """kubernetes-sigs/lws#410, kubernetes/kubernetes#64023: worker pods of LWS `<name>` belong
    to StatefulSet `<name>-<group>`, labelled `controller-revision-hash: <sts>-<10 chars>`, and a
    label value over 63 characters makes the pod uncreatable."""
    long = "a-deployment-name-long-enough-to-fill-fifty-characters"
    fl = cloud_fleet(f"""
apiVersion: modelplane.ai/v1alpha1
kind: ModelDeployment
metadata: {{name: {long}, namespace: ml-team}}
spec:
  replicas: 1
  template:
    spec:
      engines:
      - name: an-engine-with-a-long-name-too
        copies: 64
        members:
        - role: Leader
          nodeSelector: {{devices: [{{name: gpu, count: 8, selectors: [{{cel: '{GPU_CEL}'}}]}}]}}
          template: {{spec: {{containers: [{{name: engine, image: vllm/vllm-openai:v0.26.0}}]}}}}
        - role: Worker
          worker: {{nodes: 1}}
          template: {{spec: {{containers: [{{name: engine, image: vllm/vllm-openai:v0.26.0}}]}}}}
""")
    objects = render_replica(fl, fl.deployments[("ml-team", long)], place(fl, "ml-team", long, "eks-a"), "eks-a")
    lws = one(objects, "LeaderWorkerSet")
    name = lws["metadata"]["name"]
    assert len(name) <= LWS_NAME_BUDGET
    last_group = lws["spec"]["replicas"] - 1
    assert len(f"{name}-{last_group}") + REVISION_HASH_SUFFIX <= 63
    for template in lws["spec"]["leaderWorkerTemplate"].values():
        if isinstance(template, dict):
            assert template["metadata"]["labels"]["modelplane.ai/workload"] == name


def test_kai_scheduler_chart_comes_from_the_kai_scheduler_org() -> None:
    """kai-scheduler/KAI-Scheduler README.md: `helm upgrade -i kai-scheduler
    oci://ghcr.io/kai-scheduler/kai-scheduler/kai-scheduler` (the project left ghcr.io/nvidia)."""
    assert CHARTS["kai-scheduler"].chart == "oci://ghcr.io/kai-scheduler/kai-scheduler/kai-scheduler"


def test_every_chart_version_is_pinned_once_in_the_chart_table() -> None:
    """Issue 12: every chart version pinned, the pin in one place (modelplane.render.serving.CHARTS)."""
    fl = cloud_fleet()
    seen = set()
    for cluster in fl.clusters.values():
        for spec in chart_specs(cluster, fl):
            source = CHARTS[spec.name]
            assert (spec.chart, spec.version, spec.repository) == (source.chart, source.version, source.repository)
            assert re.match(r"^v?\d+\.\d+\.\d+", spec.version)
            seen.add(spec.name)
    assert {"lws", "dra-driver-nvidia-gpu", "aws-efa-k8s-device-plugin"} <= seen
    for path in [*ROOT.glob("modelplane/**/*.py"), *ROOT.glob("components/**/*.py")]:
        if path.name != "serving.py":
            assert "oci://" not in path.read_text(), path


def test_modelexpress_server_is_given_a_metadata_backend_it_accepts() -> None:
    """ai-dynamo/modelexpress modelexpress_server/src/backend_config.rs: the server exits at start
    when MX_METADATA_BACKEND is unset or not redis/kubernetes; redis also needs REDIS_URL (or
    MX_REDIS_HOST and MX_REDIS_PORT)."""
    objects = render_modelexpress("ml-team")
    server = next(o for o in objects if o["kind"] == "Deployment" and o["metadata"]["name"] == "modelexpress-server")
    env = {e["name"]: e["value"] for e in server["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["MX_METADATA_BACKEND"] in ("redis", "kubernetes", "k8s", "crd")
    host, port = re.match(r"^redis://([a-z0-9-]+):(\d+)$", env["REDIS_URL"]).groups()  # type: ignore[union-attr]
    [redis] = [o for o in by_kind(objects, "Service") if o["metadata"]["name"] == host]
    assert int(port) in [p["port"] for p in redis["spec"]["ports"]]
