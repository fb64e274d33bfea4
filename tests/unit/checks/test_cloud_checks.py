"""Lint checks for cloud misconfigurations a user can still write (issue 12): EFA the pods
cannot use, GKE pools GKE cannot size as declared, GKE GPUDirect the program does not wire,
ModelExpress without a server or an image vouched for, SGLang PD and port rules."""

from __future__ import annotations

from tests.unit.render.cloudfleet import gpu_class

from .fleets import base, messages

PRODUCT = "NVIDIA H100 80GB HBM3"


def p5(instance: str) -> str:
    return gpu_class("h100", "EKS", instance, product=PRODUCT)


def a3(machine: str) -> str:
    return gpu_class("h100", "GKE", machine, product=PRODUCT)


EKS = """
apiVersion: modelplane.ai/v1alpha1
kind: InferenceCluster
metadata: {name: c1}
spec:
  cluster: {source: EKS, eks: {region: us-east-1}}
  nodePools: [{name: h100, className: h100, nodeCount: 2, zones: [us-east-1a], fabric: {type: EFA}}]
"""
GKE = """
apiVersion: modelplane.ai/v1alpha1
kind: InferenceCluster
metadata: {name: g1}
spec:
  cluster: {source: GKE, gke: {region: us-central1}}
  nodePools: [{name: h100, className: h100, %s}]
"""


def test_efa_pool_whose_instance_type_has_efa_passes() -> None:
    assert messages(base(**{"class": p5("p5.48xlarge"), "cluster": EKS}), "efa-exposure") == []


def test_efa_pool_without_a_known_efa_instance_type_is_refused() -> None:
    assert messages(base(**{"class": p5("g5.12xlarge"), "cluster": EKS}), "efa-exposure") == [
        "[mandatory] efa-exposure: InferenceCluster/c1 (fleet.yaml#1) spec.nodePools[0].fabric.type: pool 'h100' of "
        "InferenceCluster c1 declares EFA but instance type 'g5.12xlarge' is not one known to carry EFA "
        "(g6e.48xlarge, p4d.24xlarge, p4de.24xlarge, p5.48xlarge, p5e.48xlarge, p5en.48xlarge, p6-b200.48xlarge), "
        "so the number of EFA devices its nodes carry is unknown: no pod placed there is given EFA devices "
        "(vpc.amazonaws.com/efa), so NCCL and NIXL fall back to TCP while the pool claims EFA. Fix: give class "
        "h100 a provisioning.eks.instanceType with EFA (g6e.48xlarge, p4d.24xlarge, p4de.24xlarge, p5.48xlarge, "
        "p5e.48xlarge, p5en.48xlarge, p6-b200.48xlarge), or set fabric.type: None."]


def test_gke_pool_sizes_gke_can_express_pass() -> None:
    for pool in ("nodeCount: 4, zones: [us-central1-a, us-central1-b]",
                 "nodeCount: 2, maxNodeCount: 5, zones: [us-central1-a, us-central1-b]"):
        assert messages(base(**{"class": a3("a3-ultragpu-8g"), "cluster": GKE % pool}), "gke-pool-size") == []


def test_gke_pool_that_cannot_hold_its_node_count_is_refused() -> None:
    docs = base(**{"class": a3("a3-ultragpu-8g"), "cluster": GKE % "nodeCount: 3, zones: [us-central1-a, "
                                                                       "us-central1-b]"})
    assert messages(docs, "gke-pool-size") == [
        "[mandatory] gke-pool-size: InferenceCluster/g1 (fleet.yaml#1) spec.nodePools[0]: pool 'h100': nodeCount 3 "
        "cannot be spread evenly over 2 zones and GKE sets a fixed pool's size per zone; list one zone, make "
        "nodeCount a multiple of 2, or set maxNodeCount for an autoscaled pool."]
    no_zone = base(**{"class": a3("a3-ultragpu-8g"), "cluster": GKE % "nodeCount: 2"})
    assert "GKE GPU pools need spec.nodePools[].zones" in messages(no_zone, "gke-pool-size")[0]


def test_gke_fabric_domain_on_a3_high_says_gpudirect_tcpx_is_not_wired() -> None:
    docs = base(**{"class": a3("a3-highgpu-8g"),
                   "cluster": GKE % "nodeCount: 2, zones: [us-central1-a], fabric: {domain: d1}"})
    [message] = messages(docs, "gke-gpudirect")
    assert message.startswith("[advisory] gke-gpudirect: InferenceCluster/g1 (fleet.yaml#1) "
                              "spec.nodePools[0].fabric.domain: pool 'h100' (a3-highgpu-8g) declares fabric domain "
                              "'d1'; its machines use GPUDirect-TCPX over 4 extra NICs. The pool gets COMPACT "
                              "placement and no extra VPCs are attached")
    plain = base(**{"class": a3("a3-highgpu-8g"), "cluster": GKE % "nodeCount: 2, zones: [us-central1-a]"})
    assert messages(plain, "gke-gpudirect") == []


DYNAMO = """
apiVersion: modelplane.ai/v1alpha1
kind: InferenceCluster
metadata: {name: c1}
spec:
  stack: %s
  cluster: {source: Existing, existing: {cache: {storageClassName: nfs}}}
  nodePools: [{name: h100, className: h100, nodeCount: 2, poolLabel: {mode: Present}}]
"""
CACHE = """
apiVersion: modelplane.ai/v1alpha1
kind: ModelCache
metadata: {name: qwen, namespace: ml}
spec:
  source: HuggingFace
  huggingFace: {repo: Qwen/Qwen3-8B, revision: main, sizeGiB: 20}
"""


def _mx_deployment(annotations: str = "{}", cache: bool = True, load_format: bool = True) -> str:
    ref = "modelCacheRef: {name: qwen}" if cache else ""
    args = '["Qwen/Qwen3-8B", "--load-format", "modelexpress"]' if load_format else '["Qwen/Qwen3-8B"]'
    return f"""
apiVersion: modelplane.ai/v1alpha1
kind: ModelDeployment
metadata: {{name: mx, namespace: ml, annotations: {annotations}}}
spec:
  replicas: 1
  template:
    spec:
      {ref}
      engines:
      - name: vllm
        members:
        - role: Standalone
          nodeSelector:
            devices: [{{name: gpu, count: 1, selectors: [{{cel: 'device.driver == "gpu.nvidia.com"'}}]}}]
          template: {{spec: {{containers: [{{name: engine, image: vllm/vllm-openai:v0.26.0, args: {args}}}]}}}}
"""


def test_modelexpress_loader_on_dynamo_with_a_cache_and_a_vouched_image_passes() -> None:
    docs = base(cluster=DYNAMO % "Dynamo", deployment=_mx_deployment('{modelplane.ai/modelexpress: "true"}'),
                cache=CACHE)
    assert messages(docs, "modelexpress-server") == messages(docs, "modelexpress-image") == []


def test_modelexpress_loader_without_a_server_is_refused() -> None:
    docs = base(cluster=DYNAMO % "Default", deployment=_mx_deployment(), cache=CACHE)
    assert messages(docs, "modelexpress-server") == [
        "[mandatory] modelexpress-server: ModelDeployment/ml/mx (fleet.yaml#2) "
        "spec.template.spec.engines[0].members[0].template.spec.containers[0].args[2]: engine 'vllm' loads with "
        "--load-format modelexpress but none of its clusters runs stack Dynamo, so no ModelExpress server is "
        "deployed for it and the loader has nothing to talk to. Fix: drop the flag, or reference a ModelCache and "
        "select a Dynamo cluster."]
    uncached = base(cluster=DYNAMO % "Dynamo", deployment=_mx_deployment(cache=False))
    assert "it references no ModelCache" in messages(uncached, "modelexpress-server")[0]


def test_modelexpress_loader_on_an_image_nobody_vouched_for_is_advised() -> None:
    docs = base(cluster=DYNAMO % "Dynamo", deployment=_mx_deployment(), cache=CACHE)
    [message] = messages(docs, "modelexpress-image")
    assert message.startswith("[advisory] modelexpress-image: ModelDeployment/ml/mx (fleet.yaml#2) "
                              "spec.template.spec.engines[0].members[0].template.spec.containers[0].args[2]: "
                              "engine 'vllm' asks for --load-format modelexpress; stock vLLM images")


SGL = """
apiVersion: modelplane.ai/v1alpha1
kind: ModelDeployment
metadata: {name: sgl, namespace: ml}
spec:
  replicas: 1
  template:
    spec:
      serving: {mode: PrefillDecode}
      engines:
      - name: decode
        phase: Decode
        members:
        - nodeSelector: {devices: [{name: gpu, count: 1, selectors: [{cel: 'device.driver == "gpu.nvidia.com"'}]}]}
          template: {spec: {containers: [{name: engine, image: %s, command: [python3, -m, sglang.launch_server],
                     args: [--model-path, Qwen/Qwen3-8B, --port, "%s", --disaggregation-mode, decode]}]}}
      - name: prefill
        phase: Prefill
        members:
        - nodeSelector: {devices: [{name: gpu, count: 1, selectors: [{cel: 'device.driver == "gpu.nvidia.com"'}]}]}
          template: {spec: {containers: [{name: engine, image: lmsysorg/sglang:v0.5.17,
                     command: [python3, -m, sglang.launch_server],
                     args: [--model-path, Qwen/Qwen3-8B, --port, "8000", --disaggregation-mode, %s]}]}}
"""


def test_sglang_prefill_decode_on_sglang_with_modes_and_port_passes() -> None:
    docs = base(deployment=SGL % ("lmsysorg/sglang:v0.5.17", "8000", "prefill"))
    assert messages(docs, "sglang-prefill-decode") == messages(docs, "sglang-port") == []


def test_sglang_phase_with_the_wrong_disaggregation_mode_is_refused() -> None:
    docs = base(deployment=SGL % ("lmsysorg/sglang:v0.5.17", "8000", "decode"))
    assert messages(docs, "sglang-prefill-decode") == [
        "[mandatory] sglang-prefill-decode: ModelDeployment/ml/sgl (fleet.yaml#2) "
        "spec.template.spec.engines[1].members[0].template.spec.containers[0]: engine 'prefill' is the Prefill phase "
        "but its command line says --disaggregation-mode decode: the PD router pairs prefill and decode servers by "
        "that mode. Fix: add --disaggregation-mode prefill."]


def test_sglang_paired_with_vllm_is_refused() -> None:
    mixed = (SGL % ("lmsysorg/sglang:v0.5.17", "8000", "prefill")).replace(
        "image: lmsysorg/sglang:v0.5.17,\n                     command: [python3, -m, sglang.launch_server],",
        "image: vllm/vllm-openai:v0.26.0,")
    [message] = messages(base(deployment=mixed), "sglang-prefill-decode")
    assert "engine 'prefill' (Prefill) is not SGLang while another phase is" in message


def test_sglang_on_its_default_port_is_refused() -> None:
    docs = base(deployment=SGL % ("lmsysorg/sglang:v0.5.17", "30000", "prefill"))
    assert messages(docs, "sglang-port") == [
        "[mandatory] sglang-port: ModelDeployment/ml/sgl (fleet.yaml#2) "
        "spec.template.spec.engines[0].members[0].template.spec.containers[0]: engine 'decode' runs SGLang on port "
        "30000 (SGLang's default is 30000), but the readiness probe, the Service and the router use 8000: the pods "
        "never turn Ready. Fix: add --port 8000."]
