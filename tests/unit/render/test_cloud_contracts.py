"""Contract tests: each upstream rule a real EKS/GKE cluster enforces on what we render, named
after the rule, its source in the docstring."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from modelplane.clouds.nodes import provisioned_node_labels, provisioned_node_taints
from modelplane.clouds.nvidia import DRA_KUBELET_PLUGIN_NODE_SELECTOR_TERMS, node_affinity_matches
from modelplane.render import render_replica
from modelplane.render.names import LWS_NAME_BUDGET, REVISION_HASH_SUFFIX
from modelplane.render.serving import CHARTS, chart_specs, render_modelexpress

from .cloudfleet import EFA_REQUEST, GPU_CEL, GPU_REQUEST, cloud_fleet, dra_efa_class, gang, gang_requesting
from .fleets import by_kind, one, place
from .schema import validate_any

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
    whole-node gang member takes all 32 interfaces of a p5.48xlarge."""
    fl = cloud_fleet()
    gang = render_replica(fl, fl.deployments[("ml-team", "gang")],
                          place(fl, "ml-team", "gang", "eks-a", pools={"vllm": ("efa", "efa")}), "eks-a")
    lws = one(gang, "LeaderWorkerSet")["spec"]["leaderWorkerTemplate"]
    for obj in gang:
        validate_any(obj)
    for template in (lws["leaderTemplate"], lws["workerTemplate"]):
        resources = template["spec"]["containers"][0]["resources"]
        assert resources["limits"]["vpc.amazonaws.com/efa"] == "32" == resources["requests"]["vpc.amazonaws.com/efa"]
    off = render_replica(fl, fl.deployments[("ml-team", "half")],
                         place(fl, "ml-team", "half", "eks-a", pools={"vllm": ("block",)}), "eks-a")
    assert "limits" not in one(off, "Deployment")["spec"]["template"]["spec"]["containers"][0]["resources"]


PD_QUARTER = """
apiVersion: modelplane.ai/v1alpha1
kind: ModelDeployment
metadata: {name: pdq, namespace: ml-team, annotations: {modelplane.ai/nixl: "true"}}
spec:
  replicas: 1
  template:
    spec:
      serving: {mode: PrefillDecode}
      engines:
      - name: prefill
        phase: Prefill
        members:
        - nodeSelector: {devices: [{name: gpu, count: 2, selectors: [{cel: '%(cel)s'}]}]}
          template: {spec: {containers: [{name: engine, image: vllm/vllm-openai:v0.26.0}]}}
      - name: decode
        phase: Decode
        members:
        - nodeSelector: {devices: [{name: gpu, count: 4, selectors: [{cel: '%(cel)s'}]}]}
          template: {spec: {containers: [{name: engine, image: vllm/vllm-openai:v0.26.0}]}}
""".replace("%(cel)s", GPU_CEL)


def test_efa_requests_follow_the_gpus_a_pod_claims_and_only_pods_whose_traffic_leaves_the_node() -> None:
    """aws/eks-charts stable/aws-efa-k8s-device-plugin: each interface is one
    `vpc.amazonaws.com/efa`, handed to one pod. A pod claiming a quarter of a p5.48xlarge's GPUs
    gets a quarter of its 32 interfaces (the other pods on the node still find theirs), a NIXL
    pair's engines get theirs, and a single-node engine outside PrefillDecode (TP within NVLink)
    gets none rather than interfaces it never uses."""
    fl = cloud_fleet(PD_QUARTER)
    pd = render_replica(fl, fl.deployments[("ml-team", "pdq")],
                        place(fl, "ml-team", "pdq", "eks-a", pools={"prefill": ("efa",), "decode": ("efa",)}), "eks-a")
    got = {d["metadata"]["labels"]["modelplane.ai/engine"]:
           d["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["vpc.amazonaws.com/efa"]
           for d in by_kind(pd, "Deployment") if d["metadata"]["labels"]["modelplane.ai/engine"] != "pd-router"}
    assert got == {"prefill": "8", "decode": "16"}
    half = render_replica(fl, fl.deployments[("ml-team", "half")],
                          place(fl, "ml-team", "half", "eks-a", pools={"vllm": ("efa",)}), "eks-a")
    assert "limits" not in one(half, "Deployment")["spec"]["template"]["spec"]["containers"][0]["resources"]


def test_lws_worker_controller_revision_hash_label_stays_within_63_characters() -> None:
    """kubernetes-sigs/lws#410, kubernetes/kubernetes#64023: worker pods of LWS `<name>` belong
    to StatefulSet `<name>-<group>`, labelled `controller-revision-hash: <sts>-<10 chars>`, and a
    label value over 63 characters makes the pod uncreatable."""
    long = "a-deployment-name-long-enough-to-fill-fifty-characters"
    fl = cloud_fleet(gang(long, "an-engine-with-a-long-name-too", copies=64))
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


SGLANG_PD = """
apiVersion: modelplane.ai/v1alpha1
kind: ModelDeployment
metadata: {name: sgl, namespace: ml-team}
spec:
  replicas: 1
  template:
    spec:
      serving: {mode: PrefillDecode}
      engines:
      - name: decode
        phase: Decode
        members:
        - nodeSelector: {devices: [{name: gpu, count: 8, selectors: [{cel: '%(cel)s'}]}]}
          template:
            spec:
              containers:
              - name: engine
                image: lmsysorg/sglang:v0.5.17
                command: [python3, -m, sglang.launch_server]
                args: [--model-path, Qwen/Qwen3-8B, --port, "8000", --disaggregation-mode, decode]
      - name: prefill
        phase: Prefill
        members:
        - nodeSelector: {devices: [{name: gpu, count: 8, selectors: [{cel: '%(cel)s'}]}]}
          template:
            spec:
              containers:
              - name: engine
                image: lmsysorg/sglang:v0.5.17
                command: [python3, -m, sglang.launch_server]
                args: [--model-path, Qwen/Qwen3-8B, --port, "8000", --disaggregation-mode, prefill,
                       --disaggregation-bootstrap-port, "9000"]
""".replace("%(cel)s", GPU_CEL)


def test_sglang_prefill_decode_traffic_goes_through_its_pd_router() -> None:
    """sgl-project/sglang#14628 and volcano-sh/kthena#865: an SGLang decode server answers a
    request without a bootstrap room with 400; SGLang's router (`sglang_router.launch_router
    --pd-disaggregation`, service discovery by `--prefill-selector`/`--decode-selector`, the
    prefill bootstrap port from the `sglang.ai/bootstrap-port` annotation; sgl-project/sglang
    sgl-router service_discovery.rs) pairs each request with a prefill and a decode server."""
    fl = cloud_fleet(SGLANG_PD)
    rep = place(fl, "ml-team", "sgl", "eks-a", pools={"decode": ("efa",), "prefill": ("efa",)})
    objects = render_replica(fl, fl.deployments[("ml-team", "sgl")], rep, "eks-a")
    service = one(objects, "Service")
    engines = {d["metadata"]["labels"]["modelplane.ai/engine"]: d for d in by_kind(objects, "Deployment")}
    routers = [engines["pd-router"]]
    assert len(routers) == 1
    router = routers[0]["spec"]["template"]
    # the Service reaches the router and nothing else
    for dep in by_kind(objects, "Deployment"):
        labels = dep["spec"]["template"]["metadata"]["labels"]
        selected = all(labels.get(k) == v for k, v in service["spec"]["selector"].items())
        assert selected == (dep is routers[0]), dep["metadata"]["name"]
    container = router["spec"]["containers"][0]
    assert container["command"] == ["python3", "-m", "sglang_router.launch_router"]
    assert container["image"] == "lmsysorg/sglang-router:v0.3.2"
    script = " ".join(container["args"])
    assert "--pd-disaggregation" in script
    # its selectors name exactly the prefill and the decode pods
    for phase in ("prefill", "decode"):
        tail = script.split(f"--{phase}-selector ", 1)[1].split(" --", 1)[0].split()
        terms = dict(t.split("=", 1) for t in tail)
        labels = engines[phase]["spec"]["template"]["metadata"]["labels"]
        assert terms and all(labels.get(k) == v for k, v in terms.items()), (phase, terms)
    prefill = engines["prefill"]
    assert prefill["spec"]["template"]["metadata"]["annotations"]["sglang.ai/bootstrap-port"] == "9000"
    for obj in objects:
        validate_any(obj)   # Kubernetes 1.35 OpenAPI, strict
    [role] = by_kind(objects, "Role")
    assert {"pods"} <= {r for rule in role["rules"] for r in rule["resources"]}
    assert router["spec"]["serviceAccountName"] == one(objects, "RoleBinding")["subjects"][0]["name"]


def test_vllm_prefill_decode_traffic_goes_through_vllms_pd_router() -> None:
    """vllm-project/router docs/model-routing/pd-disaggregation.md and environment/kubernetes.md:
    `vllm-router --vllm-pd-disaggregation` (NIXL: `--kv-connector nixl`) sends each request to a
    prefill server, then to a decode server with the prefill's `kv_transfer_params`, discovering
    both by label (`--service-discovery --prefill-selector ... --decode-selector ...`). Without
    it a NixlConnector kv_consumer prefills every request itself (vLLM
    docs/features/nixl_connector_usage.md) and the prefill pods idle. The Service selects the
    router; its selectors name exactly the prefill and the decode pods; it runs from an image
    that carries it (vllm-project/router Dockerfile.router), `serving.routerImage` overriding."""
    from .fleets import full_fleet

    fl = full_fleet()
    rep = place(fl, "ml-team", "pd", "kind-a")
    objects = render_replica(fl, fl.deployments[("ml-team", "pd")], rep, "kind-a")
    engines = {d["metadata"]["labels"]["modelplane.ai/engine"]: d for d in by_kind(objects, "Deployment")}
    router = engines["pd-router"]["spec"]["template"]
    service = one(objects, "Service")
    for dep in by_kind(objects, "Deployment"):
        labels = dep["spec"]["template"]["metadata"]["labels"]
        selected = all(labels.get(k) == v for k, v in service["spec"]["selector"].items())
        assert selected == (dep is engines["pd-router"]), dep["metadata"]["name"]
    container = router["spec"]["containers"][0]
    assert (container["image"], container["command"]) == ("vllm/vllm-router:v0.1.17", ["vllm-router"])
    args = container["args"]
    assert {"--vllm-pd-disaggregation", "--service-discovery"} <= set(args)
    assert args[args.index("--kv-connector") + 1] == "nixl"
    assert args[args.index("--port") + 1] == args[args.index("--service-discovery-port") + 1] == "8000"
    assert args[args.index("--service-discovery-namespace") + 1] == "ml-team"
    for phase in ("prefill", "decode"):
        start = args.index(f"--{phase}-selector") + 1
        terms = dict(t.split("=", 1) for t in args[start:start + 2])
        labels = engines[phase]["spec"]["template"]["metadata"]["labels"]
        assert terms and all(labels.get(k) == v for k, v in terms.items()), (phase, terms)
    for obj in objects:
        validate_any(obj)
    mirrored = fl.deployments[("ml-team", "pd")].model_copy(deep=True)
    serving = mirrored.spec.template.spec.serving
    assert serving is not None
    serving.router_image = "123456789012.dkr.ecr.us-east-1.amazonaws.com/vllm-router:v0.1.17"
    again = render_replica(fl, mirrored, rep, "kind-a")
    [mirror] = [d for d in by_kind(again, "Deployment")
                if d["metadata"]["labels"]["modelplane.ai/engine"] == "pd-router"]
    assert mirror["spec"]["template"]["spec"]["containers"][0]["image"] == serving.router_image


@pytest.mark.parametrize("cluster", ["eks-a", "gke-b"])
def test_platform_objects_we_render_for_the_clouds_are_valid_kubernetes(cluster: str) -> None:
    """Kubernetes 1.35 OpenAPI (kubernetes-validate, strict): the pre-chart objects (quota,
    driver installer), the cache StorageClass and the ModelExpress objects."""
    from modelplane.render.storage_class import storage_class_manifest

    for spec in _charts(cluster).values():
        for obj in spec.pre_objects:  # type: ignore[attr-defined]
            validate_any(obj)
    validate_any(storage_class_manifest("EKS" if cluster == "eks-a" else "GKE", file_system_id="fs-0123"))
    for obj in render_modelexpress("ml-team"):
        validate_any(obj)


BYO = """
apiVersion: modelplane.ai/v1alpha1
kind: InferenceCluster
metadata: {name: byo, labels: {modelplane.ai/region: c}}
spec:
  cluster: {source: Existing, existing: {}}
  nodePools:
  - {name: h100, className: p5, nodeCount: 2,
     poolLabel: {mode: Apply, nodeSelector: {matchLabels: {node.kubernetes.io/instance-type: p5.48xlarge}}}}
"""


def test_pool_labeler_on_existing_clusters_also_satisfies_the_dra_kubelet_plugin_affinity() -> None:
    """dra-driver-nvidia-gpu values.yaml `kubeletPlugin.affinity` (as above): on a cluster we do
    not provision, the pool-labelling Job adds nvidia.com/gpu.present=true to NVIDIA DRA pools."""
    from modelplane.render.pool_labels import render_pool_labeler

    fl = cloud_fleet(BYO)
    job = next(o for o in render_pool_labeler(fl.clusters["byo"], fl) if o["kind"] == "Job")
    words = job["spec"]["template"]["spec"]["containers"][0]["command"]
    applied = dict(w.split("=", 1) for w in words[words.index("-l") + 2:])
    assert applied == {"modelplane.ai/pool": "h100", "nvidia.com/gpu.present": "true"}
    assert node_affinity_matches(DRA_KUBELET_PLUGIN_NODE_SELECTOR_TERMS, applied)


BYO_TWO_POOLS = BYO + """  - {name: "a100", className: p5, nodeCount: 1,
     poolLabel: {mode: Apply, nodeSelector: {matchLabels: {example.org/gpu: a100, example.org/rack: r1}}}}
"""


def test_pool_labeler_runs_kubectl_itself_because_the_kubectl_image_has_no_shell() -> None:
    """kubernetes/kubernetes build/common.sh: `KUBECTL_BASE_IMAGE` defaults to the go-runner image
    (distroless, no `sh`), and build/server-image/Dockerfile only copies the binary into
    /usr/local/bin. A `sh -c` Job never starts there, so every Existing pool with
    `poolLabel: Apply` stays unlabelled and its pods Pending. One container per pool runs kubectl
    with its arguments as argv."""
    from modelplane.render.pool_labels import KUBECTL_IMAGE, render_pool_labeler

    fl = cloud_fleet(BYO_TWO_POOLS)
    job = next(o for o in render_pool_labeler(fl.clusters["byo"], fl) if o["kind"] == "Job")
    validate_any(job)
    containers = job["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 2 and len({c["name"] for c in containers}) == 2
    for container in containers:
        assert container["image"] == KUBECTL_IMAGE and "args" not in container
        assert container["command"][:4] == ["kubectl", "label", "nodes", "--overwrite"]
        assert not {"sh", "/bin/sh", "bash", "-c"} & set(container["command"])
    second = containers[1]["command"]
    assert second[second.index("-l") + 1] == "example.org/gpu=a100,example.org/rack=r1"
    assert "modelplane.ai/pool=a100" in second


DRA_EFA = "---".join([dra_efa_class(), """
apiVersion: modelplane.ai/v1alpha1
kind: InferenceCluster
metadata: {name: eks-dra, labels: {modelplane.ai/region: d}}
spec:
  cluster: {source: EKS, eks: {region: us-east-1}}
  nodePools:
  - {name: p5en, className: p5en, nodeCount: 2, zones: [us-east-1a], fabric: {type: EFA}}
""", gang_requesting(GPU_REQUEST + ", " + EFA_REQUEST, name="dra-gang", selector="{modelplane.ai/region: d}")])


def test_a_class_with_dra_net_efa_devices_gets_aws_dranet_and_no_efa_extended_resource() -> None:
    """Acceptance (issue 21): EKS recommends DRANET for EFA (chart aws/eks-charts stable/aws-dranet,
    driver dra.net, DeviceClass efa.networking.k8s.aws, templates/deviceclass.yaml). A class
    declaring dra.net EFA devices gets that chart, tolerating our GPU taint (its DaemonSet
    tolerates only CriticalAddonsOnly by default, templates/daemonset.yaml), never the device
    plugin on the same NICs, and its pods claim EFA through DRA, not `vpc.amazonaws.com/efa`."""
    fl = cloud_fleet(DRA_EFA)
    charts = {c.name: c for c in chart_specs(fl.clusters["eks-dra"], fl)}
    assert "aws-dranet" in charts and "aws-efa-k8s-device-plugin" not in charts
    dranet = charts["aws-dranet"]
    assert (dranet.chart, dranet.version, dranet.repository) == ("aws-dranet", "1.0.0", "https://aws.github.io/eks-charts")
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in dranet.values["tolerations"]
    objects = render_replica(fl, fl.deployments[("ml-team", "dra-gang")],
                             place(fl, "ml-team", "dra-gang", "eks-dra"), "eks-dra")
    lws = one(objects, "LeaderWorkerSet")["spec"]["leaderWorkerTemplate"]
    for template in (lws["leaderTemplate"], lws["workerTemplate"]):
        resources = template["spec"]["containers"][0]["resources"]
        assert "vpc.amazonaws.com/efa" not in {**resources.get("limits", {}), **resources.get("requests", {})}
        assert resources["claims"] == [{"name": "devices"}]
    for obj in objects:
        validate_any(obj)


def test_a_dra_claim_aligns_each_gpu_with_its_efa_by_pcie_root() -> None:
    """kubernetes/api resource/v1 types.go DeviceConstraint.MatchAttribute: every device of the
    listed requests must carry the attribute with one value; the NVIDIA GPU driver and DRANET both
    publish resource.kubernetes.io/pcieRoot (k8s-api-shapes.md §9.1; aws/karpenter-provider-aws
    pkg/providers/drametadata lists it for p5en GPUs and EFAs). So 8 GPUs and 16 EFAs become 8
    pairs (1 GPU + 2 EFAs) each constrained to one PCIe root, not one constraint no node can meet."""
    fl = cloud_fleet(DRA_EFA)
    objects = render_replica(fl, fl.deployments[("ml-team", "dra-gang")],
                             place(fl, "ml-team", "dra-gang", "eks-dra"), "eks-dra")
    for template in by_kind(objects, "ResourceClaimTemplate"):
        devices = template["spec"]["spec"]["devices"]
        counts = {r["name"]: (r["exactly"]["deviceClassName"], r["exactly"]["count"]) for r in devices["requests"]}
        assert counts == {**{f"gpu-{i}": ("gpu.nvidia.com", 1) for i in range(8)},
                          **{f"efa-{i}": ("efa.networking.k8s.aws", 2) for i in range(8)}}
        assert devices["constraints"] == [{"requests": [f"gpu-{i}", f"efa-{i}"],
                                           "matchAttribute": "resource.kubernetes.io/pcieRoot"} for i in range(8)]


def test_the_efa_device_plugin_and_dranet_never_manage_the_same_nodes() -> None:
    """https://docs.aws.amazon.com/eks/latest/userguide/device-management-efa.html (k8s-api-shapes.md
    §9.1): do not run the EFA device plugin and DRANET for EFA on the same node. On a cluster with
    both kinds of EFA pools each DaemonSet is pinned to its pools' nodes by `modelplane.ai/efa`,
    which our node groups set."""
    pool = "  - {name: p5en, className: p5en, nodeCount: 2, zones: [us-east-1a], fabric: {type: EFA}}"
    mixed = DRA_EFA.replace(pool, pool + "\n  - {name: p5, className: p5, nodeCount: 1, zones: [us-east-1a], "
                                          "fabric: {type: EFA}}")
    fl = cloud_fleet(mixed)
    spec = fl.clusters["eks-dra"]
    charts = {c.name: c for c in chart_specs(spec, fl)}
    selectors = {name: charts[name].values["nodeSelector"] for name in ("aws-dranet", "aws-efa-k8s-device-plugin")}
    assert selectors == {"aws-dranet": {"modelplane.ai/efa": "dra"},
                         "aws-efa-k8s-device-plugin": {"modelplane.ai/efa": "device-plugin"}}
    for pool in spec.gpu_pools:
        labels = provisioned_node_labels(fl, spec, pool)
        matching = [n for n, sel in selectors.items() if sel.items() <= labels.items()]
        assert matching == (["aws-dranet"] if pool.name == "p5en" else ["aws-efa-k8s-device-plugin"])
    assert "nodeSelector" not in _charts("eks-a")["aws-efa-k8s-device-plugin"].values  # type: ignore[attr-defined]


def test_an_eks_pool_that_can_grow_gets_a_cluster_autoscaler_that_discovers_it() -> None:
    """Acceptance (issue 21): examples/aws with its EFA pool changed to maxNodeCount: 3 renders a
    cluster-autoscaler that would grow it. kubernetes/autoscaler cluster-autoscaler/cloudprovider/
    aws/README.md "Auto-Discovery Setup": the autoscaler resizes the Auto Scaling groups carrying
    `k8s.io/cluster-autoscaler/enabled` and `k8s.io/cluster-autoscaler/<cluster-name>`, within their
    min and max; charts/cluster-autoscaler/values.yaml builds those tags from
    `autoDiscovery.clusterName`. The EKS source tags exactly the growable pools' groups so."""
    from modelplane.api import load_manifest_text
    from modelplane.clouds.aws import AUTOSCALER_SERVICE_ACCOUNT, autoscaler_discovery_tags, node_group_scaling

    text = (ROOT / "examples" / "aws" / "fleet.yaml").read_text()
    grown = text.replace("    nodeCount: 2\n    zones: [us-east-1a]", "    nodeCount: 2\n    maxNodeCount: 3\n"
                         "    zones: [us-east-1a]")
    assert grown != text
    fl = load_manifest_text(grown, source="examples/aws/fleet.yaml")
    spec = fl.clusters["aws-us-east"]
    charts = {c.name: c for c in chart_specs(spec, fl)}
    autoscaler = charts["cluster-autoscaler"]
    assert (autoscaler.chart, autoscaler.version, autoscaler.repository) == (
        "cluster-autoscaler", "9.59.0", "https://kubernetes.github.io/autoscaler")
    values = autoscaler.values
    assert values["cloudProvider"] == "aws" and values["awsRegion"] == "us-east-1"
    assert values["rbac"]["serviceAccount"]["name"] == AUTOSCALER_SERVICE_ACCOUNT
    # the chart's default autoDiscovery.tags, rendered with our clusterName, are the group's tags
    discovered = {"k8s.io/cluster-autoscaler/enabled",
                  f"k8s.io/cluster-autoscaler/{values['autoDiscovery']['clusterName']}"}
    assert discovered == set(autoscaler_discovery_tags("aws-us-east"))
    scaling = node_group_scaling(spec.pool("h100-efa"))  # type: ignore[arg-type]
    assert (scaling.min_size, scaling.desired_size, scaling.max_size) == (2, 2, 3) and scaling.autoscaled
    # a fixed pool gets none: its group never changes, and the scheduler counts its nodeCount
    fixed = load_manifest_text(text.replace("    maxNodeCount: 2\n", ""), source="examples/aws/fleet.yaml")
    for cluster in fixed.clusters.values():
        assert "cluster-autoscaler" not in {c.name for c in chart_specs(cluster, fixed)}


def _affinity_terms(pod_spec: dict) -> list[dict]:
    return pod_spec.get("affinity", {}).get("podAffinity", {}).get("requiredDuringSchedulingIgnoredDuringExecution", [])


def test_a_multi_node_gangs_pods_are_kept_in_one_zone() -> None:
    """Issue 21 item 9 (render side). kubernetes/enhancements KEP-3633 (matchLabelKeys in pod
    affinity): the API server merges `key in (value)` of the new pod's own label into the term's
    selector at pod creation, so one term in the template keeps each gang copy together:
    LeaderWorkerSet labels every pod of a group `leaderworkerset.sigs.k8s.io/group-index`
    (kubernetes-sigs/lws api/leaderworkerset/v1 GroupIndexLabelKey), Grove every pod of a scaling
    group replica `grove.io/podcliquescalinggroup-replica-index` (ai-dynamo/grove
    operator/api/common/labels.go). topologyKey `topology.kubernetes.io/zone` (Kubernetes
    well-known labels) is on every EKS/GKE node; Kind nodes have none, so they get no term."""
    fl = cloud_fleet(gang("copies", copies=2))
    objects = render_replica(fl, fl.deployments[("ml-team", "copies")],
                             place(fl, "ml-team", "copies", "eks-a", pools={"vllm": ("efa", "efa")}), "eks-a")
    lws = one(objects, "LeaderWorkerSet")
    name = lws["metadata"]["name"]
    for key in ("leaderTemplate", "workerTemplate"):
        template = lws["spec"]["leaderWorkerTemplate"][key]
        [term] = _affinity_terms(template["spec"])
        assert term == {"labelSelector": {"matchLabels": {"modelplane.ai/workload": name}},
                        "matchLabelKeys": ["leaderworkerset.sigs.k8s.io/group-index"],
                        "topologyKey": "topology.kubernetes.io/zone"}
        # the selector selects both templates' pods (leader and workers of the copy)
        assert template["metadata"]["labels"]["modelplane.ai/workload"] == name
    validate_any(lws)
    from .fleets import full_fleet

    grove_fleet = full_fleet()
    placed = place(grove_fleet, "research", "big", "dynamo-b", pools={"tp16": ("small", "h100")})
    dyn = render_replica(grove_fleet, grove_fleet.deployments[("research", "big")], placed, "dynamo-b")
    pcs = one(dyn, "PodCliqueSet")
    for clique in pcs["spec"]["template"]["cliques"]:
        [term] = _affinity_terms(clique["spec"]["podSpec"])
        assert term["matchLabelKeys"] == ["grove.io/podcliquescalinggroup-replica-index"]
        assert term["labelSelector"]["matchLabels"] == {"modelplane.ai/workload": pcs["metadata"]["name"]}
        assert clique["labels"]["modelplane.ai/workload"] == pcs["metadata"]["name"]
    kind = render_replica(grove_fleet, grove_fleet.deployments[("ml-team", "chat")],
                          place(grove_fleet, "ml-team", "chat", "kind-a"), "kind-a")
    assert "affinity" not in one(kind, "Deployment")["spec"]["template"]["spec"]
    kind_gang = cloud_fleet(gang("local"), """
apiVersion: modelplane.ai/v1alpha1
kind: InferenceCluster
metadata: {name: kind-k, labels: {modelplane.ai/region: k}}
spec:
  cluster: {source: Kind}
  nodePools: [{name: gpu, className: p5, nodeCount: 2}]
""")
    local = render_replica(kind_gang, kind_gang.deployments[("ml-team", "local")],
                           place(kind_gang, "ml-team", "local", "kind-k"), "kind-k")
    for key in ("leaderTemplate", "workerTemplate"):
        assert "affinity" not in one(local, "LeaderWorkerSet")["spec"]["leaderWorkerTemplate"][key]["spec"]
    half = render_replica(fl, fl.deployments[("ml-team", "half")], place(fl, "ml-team", "half", "eks-a"), "eks-a")
    assert "affinity" not in one(half, "Deployment")["spec"]["template"]["spec"]   # one pod: nothing to keep together


def test_a_workload_is_awaited_for_what_it_needs_not_an_hour() -> None:
    """pulumi/pulumi-kubernetes#457 ("Add configurable timeouts for complex awaiters"): a
    Deployment or Job is awaited for `pulumi.com/timeoutSeconds`. Issue 21 item 12: a Pending engine
    pod held `pulumi up` for the hour every Deployment got; an engine without a cache now fails
    within ENGINE_START_S, and one reading a cache within its staging and load on top."""
    from modelplane.render.readiness import ENGINE_START_S, TIMEOUT_ANNOTATION, engine_timeout_s, staging_timeout_s

    fl = cloud_fleet()
    half = render_replica(fl, fl.deployments[("ml-team", "half")], place(fl, "ml-team", "half", "eks-a"), "eks-a")
    deployment = one(half, "Deployment")
    assert deployment["metadata"]["annotations"][TIMEOUT_ANNOTATION] == str(ENGINE_START_S) == "1200"
    from modelplane.render import render_cache

    from .fleets import full_fleet

    full = full_fleet()
    chat = render_replica(full, full.deployments[("ml-team", "chat")], place(full, "ml-team", "chat", "kind-a"),
                          "kind-a")
    size = full.caches[("ml-team", "qwen")].spec.hugging_face.size_gib  # type: ignore[union-attr]
    assert one(chat, "Deployment")["metadata"]["annotations"][TIMEOUT_ANNOTATION] == str(engine_timeout_s(size))
    job = one(render_cache(full, full.caches[("ml-team", "qwen")], "kind-a"), "Job")
    assert job["metadata"]["annotations"][TIMEOUT_ANNOTATION] == str(staging_timeout_s(size))
    assert engine_timeout_s(size) < 3600 and staging_timeout_s(200) < engine_timeout_s(200)
    validate_any(deployment)
