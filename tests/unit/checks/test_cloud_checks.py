"""Lint checks for cloud misconfigurations a user can still write (issue 12): EFA the pods
cannot use, GKE pools GKE cannot size as declared, GKE GPUDirect the program does not wire,
ModelExpress without a server or an image vouched for, SGLang PD and port rules."""

from __future__ import annotations

import pytest

from tests.unit.render.cloudfleet import EFA_REQUEST, dra_efa_class, gang_requesting, gpu_class
from tests.unit.render.cloudfleet import GPU_REQUEST as GPUS

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


GANG = gang_requesting(GPUS)
GANG_WITH_EFA = gang_requesting(GPUS + ", " + EFA_REQUEST)


def test_efa_exposure_is_advisory_and_only_for_gangs_and_nixl_pairs_that_get_no_efa() -> None:
    """Issue 21 item 8: a one-pod Standalone engine has no cross-node traffic, so an EFA pool it
    cannot get EFA on is no reason to refuse the fleet (the reference accepts it); a multi-node
    gang there runs NCCL over TCP, which is worth saying, not refusing. (EFA devices reach pods
    only by request: https://docs.aws.amazon.com/eks/latest/userguide/device-management-efa.html)"""
    standalone = base(**{"class": p5("m6i.xlarge"), "cluster": EKS})
    assert messages(standalone, "efa-exposure") == []
    gang = base(**{"class": p5("m6i.xlarge"), "cluster": EKS, "deployment": GANG})
    got = messages(gang, "efa-exposure")
    assert len(got) == 2 and all(m.startswith("[advisory] efa-exposure: ModelDeployment/ml-team/llama") for m in got)
    assert "instance type 'm6i.xlarge' is not one known to carry EFA" in got[0] and "fall back to TCP" in got[0]
    assert messages(base(**{"class": p5("p5.48xlarge"), "cluster": EKS, "deployment": GANG}),
                    "efa-exposure") == []


def test_efa_exposure_is_silent_for_existing_efa_pools_of_standalone_engines() -> None:
    """An Existing cluster's EFA pool: nobody knows its instance type, and a Standalone pod
    needs no EFA; the old mandatory check refused this fleet outright."""
    from .fleets import existing_cluster, h100_class
    assert messages(base(**{"class": h100_class(), "cluster": existing_cluster(fabric="EFA")}), "efa-exposure") == []


def test_efa_exposure_on_a_dra_efa_class_asks_the_gang_to_request_efa_devices() -> None:
    docs = base(**{"class": dra_efa_class("h100"), "cluster": EKS,
                   "deployment": GANG})
    got = messages(docs, "efa-exposure")
    assert got and "requests no EFA device" in got[0] and got[0].startswith("[advisory]")
    claimed = base(**{"class": dra_efa_class("h100"), "cluster": EKS,
                      "deployment": GANG_WITH_EFA})
    assert messages(claimed, "efa-exposure") == []


def test_dra_efa_devices_must_name_the_device_class_aws_dranet_creates() -> None:
    """aws/eks-charts stable/aws-dranet values.yaml `deviceClass.name: efa.networking.k8s.aws`,
    templates/deviceclass.yaml: the only DeviceClass selecting dra.net EFA devices."""
    bad = base(**{"class": dra_efa_class("h100", "efa.example.org"), "cluster": EKS})
    assert messages(bad, "efa-dra-device-class") == [
        "[mandatory] efa-dra-device-class: InferenceClass/h100 (fleet.yaml#0) spec.devices[1].deviceClassName: "
        "device 'efa' is claimed from DeviceClass 'efa.example.org', but the aws-dranet chart the program installs "
        "for dra.net creates 'efa.networking.k8s.aws' only, so its claims never allocate. Fix: deviceClassName: "
        "efa.networking.k8s.aws."]
    assert messages(base(**{"class": dra_efa_class("h100"), "cluster": EKS}),
                    "efa-dra-device-class") == []


def test_an_eks_or_gke_pool_whose_class_has_no_provisioning_block_is_refused() -> None:
    """components/sources/eks.py and gke.py build node groups / node pools from the class's
    provisioning.eks / provisioning.gke block and fail the preview without it; lint said nothing."""
    from .fleets import h100_class
    got = messages(base(**{"class": h100_class(), "cluster": EKS}), "cloud-pool-provisioning")
    assert got == [
        "[mandatory] cloud-pool-provisioning: InferenceCluster/c1 (fleet.yaml#1) spec.nodePools[0].className: "
        "InferenceCluster c1 pool h100: class h100 has no provisioning.eks block (instanceType, accelerator), so "
        "`pulumi up` cannot create the pool's nodes. Fix: add spec.provisioning {provider: EKS, eks: {...}} to "
        "InferenceClass h100, or run the pool on a cluster of source Existing."]
    assert messages(base(**{"class": p5("p5.48xlarge"), "cluster": EKS}), "cloud-pool-provisioning") == []
    assert "provisioning.gke block" in messages(base(**{"class": p5("p5.48xlarge"),
                                                          "cluster": GKE % "nodeCount: 1, zones: [us-central1-a]"}),
                                                  "cloud-pool-provisioning")[0]


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


def test_an_autoscaled_eks_dra_pool_that_may_reach_zero_nodes_is_reported() -> None:
    """kubernetes/autoscaler cluster-autoscaler/cloudprovider/aws/README.md: at zero nodes the
    node template comes from ASG tags and EKS DescribeNodegroup (labels, taints), not from the DRA
    driver's ResourceSlices; reference issue #345 (keep minNodeCount >= 1)."""
    zero = EKS.replace("nodeCount: 2, zones", "nodeCount: 1, minNodeCount: 0, maxNodeCount: 3, zones")
    got = messages(base(**{"class": p5("p5.48xlarge"), "cluster": zero}), "eks-autoscale-from-zero")
    assert len(got) == 1 and got[0].startswith("[advisory] eks-autoscale-from-zero: InferenceCluster/c1")
    one = EKS.replace("nodeCount: 2, zones", "nodeCount: 1, minNodeCount: 1, maxNodeCount: 3, zones")
    assert messages(base(**{"class": p5("p5.48xlarge"), "cluster": one}), "eks-autoscale-from-zero") == []


@pytest.mark.parametrize("size", ["nodeCount: 1, maxNodeCount: 3", "nodeCount: 1, minNodeCount: 0, maxNodeCount: 3"])
def test_an_autoscaled_gke_dra_pool_that_may_reach_zero_nodes_is_reported(size: str) -> None:
    """kubernetes/autoscaler cluster-autoscaler/cloudprovider/gce/gce_cloud_provider.go
    (cluster-autoscaler-1.35.2) `TemplateNodeInfo`: the template node of a MIG comes from its
    instance template, with no ResourceSlices (`framework.NewNodeInfo(node, nil, ...)`), so from
    zero nodes no DRA device is visible to the scale-up simulation. A GKE pool's minimum defaults to
    0 (total_min_node_count, modelplane.clouds.gcp.gke_pool_size): issue 27 item 7."""
    cluster = GKE % f"{size}, zones: [us-central1-a]"
    [message] = messages(base(**{"class": a3("a3-highgpu-8g"), "cluster": cluster}), "eks-autoscale-from-zero")
    assert message.startswith("[advisory] eks-autoscale-from-zero: InferenceCluster/g1 (fleet.yaml#1) "
                              "spec.nodePools[0].minNodeCount: pool 'h100' may shrink to zero nodes")
    assert "GKE's cluster autoscaler cannot see the DRA devices" in message
    assert ("(unset on GKE means 0)" in message) == ("minNodeCount" not in size)


@pytest.mark.parametrize("size", ["nodeCount: 1, minNodeCount: 1, maxNodeCount: 3", "nodeCount: 2"])
def test_a_gke_pool_that_keeps_a_node_or_never_scales_is_not_reported(size: str) -> None:
    cluster = GKE % f"{size}, zones: [us-central1-a]"
    assert messages(base(**{"class": a3("a3-highgpu-8g"), "cluster": cluster}), "eks-autoscale-from-zero") == []
