"""The loader accepts reference-style manifests and rejects bad ones with a precise error."""

from __future__ import annotations

import textwrap

import pytest

from modelplane.api import ManifestError, load_documents, load_manifest_text, load_manifests

CLASS = """
apiVersion: modelplane.ai/v1alpha1
kind: InferenceClass
metadata: {name: h100-8x}
spec:
  devices:
  - name: gpu
    driver: gpu.nvidia.com
    deviceClassName: gpu.nvidia.com
    count: 8
    attributes:
      architecture: {string: Hopper}
      cudaComputeCapability: {version: 9.0.0}
    capacity:
      memory: {value: 81559Mi}
  - name: nic
    claim: Synthetic
    driver: nic.nvidia.com
    count: 8
    attributes:
      linkType: {string: infiniband}
"""

CLUSTER = """
apiVersion: modelplane.ai/v1alpha1
kind: InferenceCluster
metadata:
  name: eks-us-east
  labels: {modelplane.ai/region: us-east}
spec:
  stack: Standard
  cluster:
    source: EKS
    eks: {region: us-east-1}
  taints:
  - {key: maint, effect: NoSchedule}
  nodePools:
  - name: h100
    className: h100-8x
    nodeCount: 2
    maxNodeCount: 4
    zones: [us-east-1b]
    fabric: {type: EFA}
"""

DEPLOYMENT = """
apiVersion: modelplane.ai/v1alpha1
kind: ModelDeployment
metadata: {name: qwen, namespace: ml-team}
spec:
  replicas: 2
  template:
    metadata:
      labels: {example.org/team: search}
    spec:
      modelCacheRef: {name: qwen}
      tolerations:
      - {key: maint, operator: Exists}
      engines:
      - name: qwen
        copies: 2
        members:
        - role: Leader
          template:
            spec:
              containers:
              - {name: engine, image: "vllm/vllm-openai:v0.23.0", args: [serve]}
        - role: Worker
          worker: {nodes: 2}
          nodeSelector:
            devices:
            - name: gpu
              count: 8
              selectors:
              - cel: device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("79Gi")) >= 0
          template:
            spec:
              containers:
              - {name: engine, image: "vllm/vllm-openai:v0.23.0"}
"""

CACHE = """
apiVersion: modelplane.ai/v1alpha1
kind: ModelCache
metadata: {name: qwen, namespace: ml-team}
spec:
  source: HuggingFace
  huggingFace:
    repo: Qwen/Qwen2.5-7B-Instruct
    revision: a09a3545
    sizeGiB: 40
    authSecret: {name: hf}
"""

SERVICE = """
apiVersion: modelplane.ai/v1alpha1
kind: ModelService
metadata: {name: qwen, namespace: ml-team}
spec:
  endpoints:
  - selector: {matchLabels: {modelplane.ai/deployment: qwen}}
    weight: 90
  - selector: {matchLabels: {modelplane.ai/deployment: qwen-next}}
    weight: 10
"""


def fleet_text(*docs: str) -> str:
    return "\n---\n".join(textwrap.dedent(d) for d in docs)


def test_reference_style_fleet_loads_with_defaults():
    fleet = load_manifest_text(fleet_text(CLASS, CLUSTER, CACHE, DEPLOYMENT, SERVICE))
    cluster = fleet.clusters["eks-us-east"]
    assert cluster.spec.stack == "Default"  # the reference's "Standard"
    assert cluster.spec.node_pools[0].declared_nodes == 4  # maxNodeCount wins, as in the reference
    dep = fleet.deployments[("ml-team", "qwen")]
    leader, worker = dep.engines[0].members
    assert (leader.pods, worker.pods) == (1, 2)
    assert dep.spec.template.spec.mode == "Unified"
    assert fleet.classes["h100-8x"].spec.devices[1].claim == "Synthetic"
    assert fleet.classes["h100-8x"].spec.devices[0].attributes["cudaComputeCapability"].raw() == {"version": "9.0.0"}
    assert fleet.cache_for(dep).revision == "a09a3545"
    assert fleet.services[("ml-team", "qwen")].spec.endpoints[1].weight == 10


def test_round_trip_through_documents_is_lossless():
    fleet = load_manifest_text(fleet_text(CLASS, CLUSTER, CACHE, DEPLOYMENT, SERVICE))
    again = load_documents(fleet.to_documents())
    assert again.to_documents() == fleet.to_documents()


def test_replicas_zero_parks_a_deployment():
    fleet = load_manifest_text(fleet_text(CLASS, CACHE, DEPLOYMENT.replace("replicas: 2", "replicas: 0")))
    assert fleet.deployments[("ml-team", "qwen")].spec.replicas == 0


BAD_CASES = {
    "unknown field lists the allowed ones": (
        DEPLOYMENT.replace("copies: 2", "copies: 2\n        replicaz: 3"),
        "at spec.template.spec.engines[0].replicaz: unknown field 'replicaz'; "
        "fields allowed here: copies, members, name, phase",
    ),
    "copies out of range": (
        DEPLOYMENT.replace("copies: 2", "copies: 100"),
        "at spec.template.spec.engines[0].copies: Input should be less than or equal to 64 (got 100)",
    ),
    "worker block on a leader": (
        DEPLOYMENT.replace("- role: Leader\n", "- role: Leader\n          worker: {nodes: 1}\n"),
        "worker is only allowed on role Worker (this member is Leader)",
    ),
    "reserved label prefix": (
        DEPLOYMENT.replace("example.org/team", "modelplane.ai/team"),
        "uses the reserved prefix 'modelplane.ai/'",
    ),
    "two containers": (
        DEPLOYMENT.replace('- {name: engine, image: "vllm/vllm-openai:v0.23.0"}\n',
                           '- {name: engine, image: "x"}\n              - {name: sidecar, image: "y"}\n'),
        "exactly one container named 'engine' is required (found: engine, sidecar)",
    ),
    "exists toleration with a value": (
        DEPLOYMENT.replace("{key: maint, operator: Exists}", "{key: maint, operator: Exists, value: x}"),
        "a toleration with operator Exists must not set value",
    ),
    "missing cache": (
        DEPLOYMENT.replace("modelCacheRef: {name: qwen}", "modelCacheRef: {name: nope}"),
        "ModelCache ml-team/nope does not exist",
    ),
    "bad CEL names the engine and member": (
        DEPLOYMENT.replace('compareTo(quantity("79Gi")) >= 0', 'compareTo(quantity("79Gi") >= '),
        "at spec.template.spec.engines[0].members[1].nodeSelector.devices[0].selectors[0].cel: "
        "engine 'qwen' member Worker request 'gpu': invalid CEL selector",
    ),
}


@pytest.mark.parametrize("name", sorted(BAD_CASES))
def test_invalid_deployment_is_rejected_with_path_and_fix(name):
    text, expected = BAD_CASES[name]
    with pytest.raises(ManifestError) as err:
        load_manifest_text(fleet_text(CLASS, CACHE, text), source="team.yaml")
    message = str(err.value)
    assert "team.yaml, document 2 (ModelDeployment ml-team/qwen)" in message
    assert expected in message
    assert "nothing was applied" in message


@pytest.mark.parametrize(
    "doc, expected",
    [
        (CLASS.replace("    deviceClassName: gpu.nvidia.com\n", ""), "has claim DRA but no deviceClassName"),
        (CLASS.replace("{value: 81559Mi}", "{value: 80 Gi}"), "'80 Gi' is not a Kubernetes quantity"),
        (CLASS.replace("{version: 9.0.0}", "{version: v9}"), "'v9' is not a semantic version"),
        (CLASS.replace("{string: Hopper}", "{string: Hopper, int: 3}"), "exactly one of string, version, bool or int"),
        (CLUSTER.replace("eks: {region: us-east-1}", "gke: {region: us-east1}"),
         "cluster.eks is required when source is EKS"),
        (CLUSTER.replace("className: h100-8x", "className: a100"), "InferenceClass 'a100' does not exist"),
        (CLUSTER.replace("metadata:\n", "metadata:\n  namespace: x\n"), "InferenceCluster is cluster-scoped"),
        ("apiVersion: v1\nkind: Secret\nmetadata: {name: hf}\n", "secrets come from Pulumi config"),
        ("apiVersion: modelplane.ai/v1alpha1\nkind: ModelReplica\nmetadata: {name: r}\n", "composed by the scheduler"),
        ("apiVersion: modelplane.ai/v1alpha1\nkind: Gadget\nmetadata: {name: r}\n", "unknown kind; use one of"),
    ],
)
def test_invalid_platform_manifests(doc, expected):
    with pytest.raises(ManifestError) as err:
        load_manifest_text(fleet_text(CLASS, doc) if "InferenceClass" not in doc else fleet_text(doc))
    assert expected in str(err.value)


def test_one_bad_document_in_a_directory_applies_nothing(tmp_path):
    (tmp_path / "a.yaml").write_text(fleet_text(CLASS, CLUSTER))
    (tmp_path / "b.yaml").write_text(fleet_text(CACHE, DEPLOYMENT.replace("replicas: 2", "replicas: -1")))
    with pytest.raises(ManifestError) as err:
        load_manifests(tmp_path)
    assert len(err.value.issues) == 1
    assert err.value.issues[0].file.endswith("b.yaml") and err.value.issues[0].path == "spec.replicas"


def test_duplicate_names_point_at_the_first_definition(tmp_path):
    (tmp_path / "a.yaml").write_text(fleet_text(CLASS))
    (tmp_path / "b.yaml").write_text(fleet_text(CLASS))
    with pytest.raises(ManifestError, match=r"duplicate: already defined in .*a.yaml#0"):
        load_manifests(tmp_path)


def test_prefill_decode_needs_one_engine_per_phase():
    text = DEPLOYMENT.replace("      engines:", "      serving: {mode: PrefillDecode}\n      engines:")
    with pytest.raises(ManifestError, match="needs exactly two engines, one with phase Prefill"):
        load_manifest_text(fleet_text(CLASS, CACHE, text))


def test_example_fleet_loads():
    fleet = load_manifests("examples/kind")
    assert sorted(fleet.clusters) == ["eu-west", "us-east"]


def test_member_may_declare_nixl_but_no_other_reserved_annotation():
    with_nixl = DEPLOYMENT.replace("        - role: Leader\n          template:\n",
                                   "        - role: Leader\n          template:\n            metadata:\n"
                                   "              annotations: {modelplane.ai/nixl: \"true\"}\n")
    fleet = load_manifest_text(fleet_text(CLASS, CACHE, with_nixl))
    leader = fleet.deployments[("ml-team", "qwen")].engines[0].members[0]
    assert leader.template.metadata.annotations == {"modelplane.ai/nixl": "true"}
    with pytest.raises(ManifestError, match="reserved prefix"):
        load_manifest_text(fleet_text(CLASS, CACHE, with_nixl.replace("modelplane.ai/nixl", "modelplane.ai/other")))


def test_missing_field_names_itself():
    with pytest.raises(ManifestError) as err:
        load_manifest_text(CACHE.replace("    sizeGiB: 40\n", ""))
    assert "at spec.huggingFace.sizeGiB: required field 'sizeGiB' is missing; add it here" in str(err.value)


NEWER_GATEWAY = """
apiVersion: modelplane.ai/v1alpha1
kind: InferenceGateway
metadata: {name: local}
spec:
  clusterName: eks-us-east
"""


@pytest.mark.parametrize(
    "extra, check",
    [
        ("", lambda gw: gw.spec.backend is None and gw.spec.cluster_name == "eks-us-east"),
        ("  tls: {certificateRefs: [{name: eu-tls}]}\n"
         "  auth: {method: APIKey, apiKey: {secretSelector: {matchLabels: {example.org/keys: 'true'}}}}\n"
         "  serviceSelector: {matchLabels: {example.org/region: eu}}\n",
         lambda gw: gw.spec.tls.certificate_refs[0].name == "eu-tls" and gw.spec.auth.method == "APIKey"),
    ],
    ids=["cluster-hosted", "tls-and-auth"],
)
def test_newer_reference_gateway_forms_load(extra, check):
    fleet = load_manifest_text(fleet_text(CLASS, CLUSTER, NEWER_GATEWAY + extra))
    assert check(fleet.gateways["local"]) and fleet.control_gateway() is fleet.gateways["local"]


def test_v031_gateway_still_needs_its_traefik_settings():
    doc = ("apiVersion: modelplane.ai/v1alpha1\nkind: InferenceGateway\nmetadata: {name: default}\n"
           "spec: {backend: Traefik}\n")
    with pytest.raises(ManifestError, match="traefik \\(with version, the Traefik Helm chart version\\) is required"):
        load_manifest_text(doc)


@pytest.mark.parametrize(
    "doc, expected",
    [
        (NEWER_GATEWAY.replace("eks-us-east", "nowhere"), "InferenceCluster 'nowhere' does not exist"),
        (NEWER_GATEWAY + "---\n" + NEWER_GATEWAY.replace("name: local", "name: other"),
         "2 InferenceGateways (local, other); this program deploys one control-plane gateway"),
    ],
)
def test_gateway_cross_references(doc, expected):
    with pytest.raises(ManifestError, match=expected.replace("(", "\\(").replace(")", "\\)")):
        load_manifest_text(fleet_text(CLASS, CLUSTER, doc))


def test_existing_cluster_may_declare_provided_components():
    provided = CLUSTER.replace("source: EKS\n    eks: {region: us-east-1}",
                               "source: Existing\n    existing:\n      components: Provided\n"
                               "      secretRef: {name: byo-kubeconfig}")
    cluster = load_manifest_text(fleet_text(CLASS, provided)).clusters["eks-us-east"]
    assert cluster.spec.cluster.existing.components == "Provided"
    assert cluster.spec.cluster.existing.secret_ref.key == "kubeconfig"


def test_vultr_bare_metal_source_and_provisioning_load():
    klass = CLASS.replace("spec:\n  devices:", "spec:\n  provisioning:\n    provider: VultrBaremetal\n"
                          "    vultrBaremetal: {plan: vbm-256c, accelerator: {type: amd-mi325x, count: 8}}\n  devices:")
    cluster = CLUSTER.replace("source: EKS\n    eks: {region: us-east-1}",
                              "source: VultrBaremetal\n    vultrBaremetal:\n      region: ord\n"
                              "      ssh: {secretRef: {name: ssh}}")
    fleet = load_manifest_text(fleet_text(klass, cluster))
    assert fleet.clusters["eks-us-east"].source == "VultrBaremetal"
    with pytest.raises(ManifestError, match="cluster.vultrBaremetal is required when source is VultrBaremetal"):
        load_manifest_text(fleet_text(CLASS, CLUSTER.replace("source: EKS", "source: VultrBaremetal")))
