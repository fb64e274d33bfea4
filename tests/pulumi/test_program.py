"""The whole program (`__main__.py`) under mocks, per stack: which resources, which
provider each uses, key fields, and outputs that must be resolved (not unknown)."""

from __future__ import annotations

import json
import os

import pytest
import yaml

from tests.pulumi.fleets import fleet_text
from tests.pulumi.harness import resolve, run_program

K8S_TYPES = ("kubernetes:", "modelplane:index:ServingStack", "modelplane:index:WorkloadGateway",
             "modelplane:index:ControlPlaneGateway")
BYO_KEYS = {"endpointApiKeys": {"ml-team/together-key": "sk-test-123"}}


def uses_cluster_provider(run, cluster_providers: set[str]) -> None:
    """Every Kubernetes resource names an explicit per-cluster provider (default
    providers are disabled in every stack)."""
    for reg in run.resources:
        if reg.typ.startswith("kubernetes:") and reg.custom:
            assert run.provider_of(reg) in cluster_providers, (reg.typ, reg.name, reg.provider)




@pytest.fixture(scope="module")
def render():
    return run_program("render")


def test_render_stack_registers_one_rendering_provider_per_cluster(render):
    providers = {r.name: r.inputs for r in render.of_type("pulumi:providers:kubernetes")}
    assert set(providers) == {"eu-west-k8s", "us-east-k8s", "control-k8s"}
    for name, inputs in providers.items():
        assert inputs["renderYamlToDirectory"] == os.path.join("render-out", name[:-4])
        assert "kubeconfig" not in inputs
    assert not render.of_type("command:local:Command")  # nothing provisioned
    assert not render.of_type("kubernetes:helm.sh/v4:Chart")  # offline: no chart fetched
    uses_cluster_provider(render, set(providers))


def test_render_stack_places_each_replica_on_its_cluster_only(render):
    chat_eu = render.objects("ml-team-chat", "eu-west")
    assert {o["kind"] for o in chat_eu} >= {"Deployment", "Service", "ResourceClaimTemplate"}
    assert all(o["metadata"]["labels"]["modelplane.ai/cluster"] == "eu-west" for o in chat_eu)
    assert render.objects("ml-team-chat", "us-east") == []
    assert render.objects("ml-team-chat-canary", "eu-west") == []
    service = render.named("eu-west:ml-team/chat-2e4ec", "kubernetes:core/v1:Service")
    assert render.provider_of(service) == "eu-west-k8s" and service.parent.endswith("::ml-team-chat")
    rct = [r for r in render.resources if r.typ == "kubernetes:resource.k8s.io/v1:ResourceClaimTemplate"]
    assert len(rct) == 2 and all(r.custom for r in rct)


def test_render_stack_outputs_are_resolved(render):
    deployments = resolve(render.outputs["deployments"])
    assert deployments["ml-team/chat"]["replicas"][0]["cluster"] == "eu-west"
    assert deployments["ml-team/chat"]["replicas"][0]["pools"] == {"mock": ["gpu"]}
    assert deployments["ml-team/chat-canary"]["replicas"][0]["cluster"] == "us-east"
    assert deployments["ml-team/chat"]["conditions"][0]["type"] == "ReplicasScheduled"
    services = resolve(render.outputs["services"])
    chat = services["ml-team/chat"]
    assert chat["url"].endswith("/ml-team/chat")
    assert {w["entry"]: w["weight"] for w in chat["weights"]} == {"stable": 9, "canary": 1}
    placement = resolve(render.outputs["placement"])
    assert [d["name"] for d in placement["deployments"]] == ["chat", "chat-canary"]


def test_render_stack_prints_the_placement_table(render):
    from modelplane.api import load_manifests
    from modelplane.scheduler import place_fleet
    from modelplane.scheduler.placement_report import format_table

    table = next(m for m in render.infos() if m.startswith("placement:"))
    assert "ml-team/chat: 1 of 1 replicas placed" in table and "eu-west" in table and "mock->gpu" in table
    # one home: the preview shows exactly what `modelplane plan` prints
    assert table == "placement:\n" + format_table(place_fleet(load_manifests("examples/kind")))


def test_components_carry_props_and_labels(render):
    dep = render.named("ml-team-chat")
    assert dep.typ == "modelplane:index:ModelDeployment"
    assert dep.inputs["clusters"] == ["eu-west", "us-east"] and dep.inputs["manifest"]["kind"] == "ModelDeployment"
    cluster = render.named("eu-west")
    assert cluster.inputs["source"] == "Kind" and cluster.inputs["renderDir"]
    # labels on everything: ours say part-of modelplane, the renderers' say managed-by modelplane
    for reg in render.resources:
        if reg.typ.startswith("kubernetes:") and reg.custom:
            labels = reg.inputs["metadata"]["labels"]
            ours = (labels.get("app.kubernetes.io/part-of"), labels.get("app.kubernetes.io/managed-by"))
            assert "modelplane" in ours, reg.name
    placement = render.named("fleet-placement")
    assert placement.typ == "pulumi-python:dynamic/modelplane:FleetPlacement"
    assert {"fleet", "accounting", "__provider"} <= set(placement.inputs)


def test_one_tree_under_the_root_component_and_old_urns_kept_by_aliases(render):
    root = render.named("modelplane", "modelplane:index:ModelplaneFleet")
    by_urn = {r.urn: r for r in render.resources}
    for reg in render.resources:
        if reg is root:
            assert "pulumi:pulumi:Stack" in reg.parent
            continue
        # every resource descends from the root: `pulumi preview` shows one tree
        top = reg
        while top.parent in by_urn and by_urn[top.parent] is not root:
            top = by_urn[top.parent]
        assert top.parent == root.urn, (reg.typ, reg.name)
    # the root's direct children were stack children before it existed: each carries the
    # alias that keeps its old URN (and its children's), so no existing stack replaces them
    direct = [r for r in render.resources if r.parent == root.urn]
    assert {r.typ for r in direct} >= {"pulumi-python:dynamic/modelplane:FleetPlacement",
                                       "modelplane:index:InferenceCluster", "modelplane:index:ModelDeployment",
                                       "modelplane:index:ModelService"}
    for reg in direct:
        assert {"spec": {"noParent": True}} in reg.aliases, (reg.name, reg.aliases)


def test_gateways_are_configured_from_the_data_path_builders(render):
    routes = yaml.safe_load(render.named("modelplane-gateway-routes").inputs["data"]["routes.yaml"])
    services = routes["http"]["services"]
    weighted = next(s for s in services.values() if "weighted" in s)
    children = {c["name"]: c["weight"] for c in weighted["weighted"]["services"]}
    assert sorted(children.values()) == [1, 9]
    urls = {s["loadBalancer"]["servers"][0]["url"] for s in services.values() if "loadBalancer" in s}
    # mutual TLS between the hops: the workload gateways are dialled over https
    assert urls == {"https://eu-west-control-plane:30080", "https://us-east-control-plane:30080"}
    wl = yaml.safe_load(render.named("eu-west-gateway-routes").inputs["data"]["routes.yaml"])
    servers = [s["loadBalancer"]["servers"][0]["url"] for s in wl["http"]["services"].values() if "loadBalancer" in s]
    assert servers == ["http://chat-2e4ec.ml-team.svc.cluster.local:8000"]
    assert render.provider_of(render.named("modelplane-gateway-routes")) == "control-k8s"


def test_kind_stack_creates_clusters_with_pool_labels_and_fake_gpus():
    run = run_program("kind")
    commands = {r.name: r.inputs for r in run.of_type("command:local:Command")}
    assert set(commands) == {"eu-west-kind", "us-east-kind", "control-kind"}
    config = yaml.safe_load(commands["eu-west-kind"]["stdin"])
    assert config["nodes"][1] == {"role": "worker", "labels": {"modelplane.ai/pool": "gpu"}}
    assert "kindest/node:v1.36.1@sha256:" in commands["eu-west-kind"]["create"]
    control = yaml.safe_load(commands["control-kind"]["stdin"])
    assert control["nodes"][0]["extraPortMappings"][0]["hostPort"] == 8080
    charts = {r.name: r for r in run.of_type("kubernetes:helm.sh/v4:Chart")}
    dra = charts["eu-west-serving-dra-example-driver"]
    assert dra.inputs["chart"] == "oci://registry.k8s.io/dra-example-driver/charts/dra-example-driver"
    assert dra.inputs["version"] == "0.4.0" and dra.inputs["values"]["kubeletPlugin"]["numDevices"] == 1
    assert run.provider_of(dra) == "eu-west-k8s"
    assert "us-east-serving-lws" in charts
    providers = {r.name: r for r in run.of_type("pulumi:providers:kubernetes")}
    assert providers["eu-west-k8s"].inputs["clusterIdentifier"].startswith("eu-west@kind-")
    uses_cluster_provider(run, set(providers))
    assert resolve(run.outputs["services"])["ml-team/chat"]["url"] == "http://localhost:8080/ml-team/chat"
    # the examples' engines run `python /opt/modelplane/mock_engine.py`: each region ships it
    mock = {r.name: r for r in run.of_type("kubernetes:core/v1:ConfigMap") if "mock-engine" in r.name}
    assert {run.provider_of(r) for r in mock.values()} == {"eu-west-k8s", "us-east-k8s"}
    for r in mock.values():
        assert r.inputs["metadata"]["name"] == "modelplane-mock-engine"
        assert r.inputs["metadata"]["namespace"] == "ml-team"
        assert "def main" in r.inputs["data"]["mock_engine.py"]


@pytest.mark.parametrize(("image", "refused"), [
    ("kindest/node:v1.34.0", True), ("kindest/node:v1.34.1", True), ("kindest/node:v1.33.4", True),
    ("kindest/node@sha256:" + "0" * 64, True), ("kindest/node:v1.34.2", False), ("kindest/node:v1.35.1", False)])
def test_kind_node_image_rule_kubelet_dra_idle_deadlock_fixed_in_v1_34_2(tmp_path, image, refused):
    """Rule: kubelet 1.34.0 and 1.34.1 deadlock their DRA driver connection after it sat idle
    for 30 minutes (kubernetes/kubernetes#133920, a 1.34 regression), fixed by
    kubernetes/kubernetes#133926 and its release-1.34 cherry-pick #133934, so from v1.34.2
    on; resource.k8s.io/v1, which the renderers use, is served from 1.34. Checked with the
    search tool. The program refuses exactly what the kind-node-image policy flags (one
    rule: modelplane/checks/kind_node_image.py), with a clean error naming the manifest."""
    import pulumi

    from modelplane.api import load_manifests
    from modelplane.checks import CHECKS, CheckContext
    from modelplane.scheduler import place_fleet

    text = fleet_text({"eu-west": 1}, {"chat": 1}, node_image=image)
    (tmp_path / "fleet.yaml").write_text(text)
    fleet = load_manifests(tmp_path)
    flagged = list(CHECKS["kind-node-image"].run(CheckContext(fleet, place_fleet(fleet), None, [], {})))
    assert bool(flagged) == refused
    if refused:
        with pytest.raises(pulumi.RunError, match=r"fleet\.yaml#1: InferenceCluster eu-west: node image") as err:
            run_program("kind", config={"manifests": str(tmp_path)})
        assert flagged[0].message in str(err.value)
    else:
        run = run_program("kind", config={"manifests": str(tmp_path)})
        assert image in run.named("eu-west-kind").inputs["create"]


def test_aws_stack_builds_gpu_node_groups_with_efa():
    run = run_program("aws")
    groups = {r.name: r.inputs for r in run.of_type("aws:eks/nodeGroup:NodeGroup")}
    efa = groups["aws-us-east-h100-efa"]
    assert efa["amiType"] == "AL2023_x86_64_NVIDIA" and efa["instanceTypes"] == ["p5.48xlarge"]
    assert efa["labels"] == {"modelplane.ai/pool": "h100-efa", "nvidia.com/gpu.present": "true",
                             "modelplane.ai/efa": "device-plugin"}
    assert efa["scalingConfig"]["desiredSize"] == 2 and "launchTemplate" in efa
    assert "launchTemplate" not in groups["aws-us-west-h100"]
    lt = run.named("aws-us-east-h100-efa-lt").inputs
    nics = lt["networkInterfaces"]
    assert len(nics) == 32 and nics[0]["interfaceType"] == "efa" and nics[1]["interfaceType"] == "efa-only"
    assert lt["placement"]["groupName"]
    assert run.named("aws-us-east-h100-efa-pg").inputs["strategy"] == "cluster"
    sg = run.named("aws-us-east-h100-efa-efa").inputs
    assert sg["ingress"][0]["self"] is True
    eks = run.of_type("aws:eks/cluster:Cluster")
    assert {run.provider_of(c) for c in eks} == {"aws-us-east-aws", "aws-us-west-aws"}
    regions = {r.name: r.inputs["region"] for r in run.of_type("pulumi:providers:aws")}
    assert regions == {"aws-us-east-aws": "us-east-1", "aws-us-west-aws": "us-west-2"}
    k8s = run.named("aws-us-east-k8s").inputs
    assert "kubeconfig" in k8s
    assert resolve(run.outputs["services"])["ml-team/llama"]["url"].startswith("http://")


def test_gcp_stack_builds_gpu_pools_with_accelerators_and_compact_placement():
    profile = "projects/p/global/networkProfiles/us-central1-b-vpc-roce"
    run = run_program("gcp", config={"gcp": {"project": "p", "rdmaNetworkProfile": profile, "rdmaNics": 2}})
    pools = {r.name: r.inputs for r in run.of_type("gcp:container/nodePool:NodePool")}
    h200 = pools["gcp-us-central-h200"]
    acc = h200["nodeConfig"]["guestAccelerators"][0]
    assert acc["type"] == "nvidia-h200-141gb" and acc["count"] == 8
    assert acc["gpuDriverInstallationConfig"]["gpuDriverVersion"] == "INSTALLATION_DISABLED"
    assert h200["nodeConfig"]["labels"] == {"modelplane.ai/pool": "h200", "nvidia.com/gpu.present": "true",
                                            "gke-no-default-nvidia-gpu-device-plugin": "true"}
    assert h200["placementPolicy"]["type"] == "COMPACT"
    assert len(h200["networkConfig"]["additionalNodeNetworkConfigs"]) == 2
    l4 = pools["gcp-europe-west-l4"]
    assert "placementPolicy" not in l4 and l4["autoscaling"]["totalMaxNodeCount"] == 4
    cluster = run.named("gcp-us-central", "gcp:container/cluster:Cluster").inputs
    assert cluster["datapathProvider"] == "ADVANCED_DATAPATH" and cluster["enableMultiNetworking"] is True
    assert cluster["deletionProtection"] is False


def test_byo_stack_uses_secret_kubeconfigs_labels_pools_and_keeps_api_keys_secret():
    config = {**BYO_KEYS, "kubeconfigs": {"byo-east": "apiVersion: v1\nkind: Config\n"}}
    run = run_program("byo", config=config)
    east = run.named("byo-east-k8s")
    assert east.inputs["kubeconfig"].startswith("apiVersion")
    assert run.named("byo-west-k8s").inputs["kubeconfig"].endswith("byo-west.yaml")
    labeler = run.objects("byo-east", "byo-east")
    job = next(o for o in labeler if o["kind"] == "Job")
    argv = job["spec"]["template"]["spec"]["containers"][0]["command"]
    assert argv[argv.index("-l") + 1] == "node.kubernetes.io/instance-type=a2-ultragpu-4g"
    assert not [o for o in run.objects("byo-west", "byo-west") if o["kind"] == "Job"]  # mode Present
    egress = run.named("modelplane-gateway-egress")
    assert egress.typ == "kubernetes:core/v1:Secret"
    assert run.secret_inputs(egress) >= {"stringData"}
    assert run.secret_inputs(east) >= {"kubeconfig"}
    weights = resolve(run.outputs["services"])["ml-team/mistral"]["weights"]
    assert sorted((w["entry"], w["weight"]) for w in weights) == [("own", 2), ("own", 2), ("saas", 1)]
    # the key is nowhere in plain inputs or outputs
    plain = json.dumps([r.inputs for r in run.resources if r.name != "modelplane-gateway-egress"], default=str)
    assert "sk-test-123" not in plain
    assert "sk-test-123" not in json.dumps(resolve(run.outputs["services"]))


def test_render_mode_never_writes_a_secret_and_names_the_secrets_to_create():
    """GitOps output is committed: no Secret holding a configured key is rendered; the
    objects reference Secrets the user creates, and the preview says which."""
    hf = "hf_render_canary_0123456789"
    key = BYO_KEYS["endpointApiKeys"]["ml-team/together-key"]
    for manifests, config in (("examples/byo", BYO_KEYS), ("examples/aws", {"hfToken": hf})):
        run = run_program("render", config={"manifests": manifests, **config}, secret_keys=["modelplane:hfToken"])
        assert not run.of_type("kubernetes:core/v1:Secret"), [r.name for r in run.of_type("kubernetes:core/v1:Secret")]
        assert key not in json.dumps([r.inputs for r in run.resources], default=str)
        assert hf not in json.dumps([r.inputs for r in run.resources], default=str)
    run = run_program("render", config={"manifests": "examples/byo", **BYO_KEYS})
    notice = next(w for w in run.warnings() if "never written" in w)
    assert "Secret modelplane-system/egress.ml-team.together-key (key apiKey)" in notice
    egress = run.named("modelplane-gateway-egress", "kubernetes:core/v1:ConfigMap")
    assert '{{ env "MODELPLANE_EGRESS_KEY_0" }}' in egress.inputs["data"]["egress.yaml"]
    gateway = run.named("modelplane-gateway", "kubernetes:apps/v1:Deployment").inputs
    env = gateway["spec"]["template"]["spec"]["containers"][0]["env"]
    assert env == [{"name": "MODELPLANE_EGRESS_KEY_0",
                    "valueFrom": {"secretKeyRef": {"name": "egress.ml-team.together-key", "key": "apiKey"}}}]
    aws = run_program("render", config={"manifests": "examples/aws", "hfToken": hf})
    assert any("Hugging Face token of ModelCache ml-team/llama-70b" in w
               for w in aws.warnings() if "never written" in w)


def test_dynamo_example_installs_grove_kai_and_modelexpress():
    run = run_program("kind", config={"manifests": "examples/dynamo"})
    charts = {r.name for r in run.of_type("kubernetes:helm.sh/v4:Chart")}
    assert {"dynamo-local-serving-grove", "dynamo-local-serving-kai-scheduler"} <= charts
    assert "dynamo-local-serving-lws" not in charts
    queue = run.named("dynamo-local-serving-kai-queue")
    assert queue.typ == "kubernetes:scheduling.run.ai/v2:Queue"
    objs = run.objects("ml-team-qwen-gang", "dynamo-local")
    assert "PodCliqueSet" in {o["kind"] for o in objs}
    assert run.named("dynamo-local:ml-team/qwen-gang-713bd-vl-93e6a").typ == "kubernetes:grove.io/v1alpha1:PodCliqueSet"
    mx = [o for o in run.objects("dynamo-local", "dynamo-local") if o["metadata"]["name"] == "modelexpress-server"]
    assert {o["kind"] for o in mx} == {"Deployment", "Service"}
    assert {o["kind"] for o in run.objects("cache-ml-team-qwen", "dynamo-local")} == {"PersistentVolumeClaim", "Job"}


def test_shortfall_warns_with_explanations(tmp_path):
    (tmp_path / "fleet.yaml").write_text(fleet_text({"eu-west": 1, "us-east": 1}, {"chat": 2}, copies=2))
    run = run_program("render", config={"manifests": str(tmp_path)})
    warning = next(w for w in run.warnings() if "ml-team/chat" in w)
    assert "0 of 2 replicas placed" in warning and "eu-west:" in warning and "us-east:" in warning
    explained = resolve(run.outputs["deployments"])["ml-team/chat"]["explanations"]
    assert len(explained) == 2


def test_two_runs_keep_replicas_put(tmp_path):
    (tmp_path / "fleet.yaml").write_text(fleet_text({"eu-west": 1, "us-east": 1}, {"chat": 1}, service=True))
    first = run_program("render", config={"manifests": str(tmp_path)})
    assert resolve(first.outputs["deployments"])["ml-team/chat"]["replicas"][0]["cluster"] == "eu-west"
    # an alphabetically earlier cluster appears: a fresh placement would pick it
    grown = fleet_text({"ap-south": 1, "eu-west": 1, "us-east": 1}, {"chat": 1}, service=True)
    (tmp_path / "fleet.yaml").write_text(grown)
    second = run_program("render", config={"manifests": str(tmp_path)}, previous=first.state)
    assert resolve(second.outputs["deployments"])["ml-team/chat"]["replicas"][0]["cluster"] == "eu-west"
    assert second.objects("ml-team-chat", "ap-south") == []
    assert second.objects("ml-team-chat", "eu-west")
    fresh = run_program("render", config={"manifests": str(tmp_path)})
    assert resolve(fresh.outputs["deployments"])["ml-team/chat"]["replicas"][0]["cluster"] == "ap-south"


def test_preview_mode_still_knows_the_placement():
    run = run_program("render", preview=True)
    assert resolve(run.outputs["deployments"])["ml-team/chat"]["replicas"]
    assert run.objects("ml-team-chat", "eu-west")


def test_resolve_fails_on_an_unresolved_output():
    """The guard the other tests rely on: under preview mocks a value the mock did not
    return is unknown, and reading it must fail rather than pass vacuously."""
    run = run_program("render", preview=True)
    namespace = run.program["fleet"].clusters["eu-west"].namespace
    with pytest.raises(AssertionError, match="never resolved"):
        resolve(namespace.status)  # the mock returns inputs only: status stays unknown
