"""A fleet shaped like the real aws and gcp stacks: EKS p5 pools (EFA, capacity block), GKE
A3 pools, NVIDIA DRA classes with provisioning blocks."""

from __future__ import annotations

from modelplane.api import Fleet, load_manifest_text

GPU_CEL = 'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("79Gi")) >= 0'

def gpu_class(name: str, provider: str, machine: str, *, accelerator: str = "nvidia-h100-80gb", count: int = 8,
              memory: str = "81559Mi", product: str | None = None) -> str:
    """An NVIDIA DRA InferenceClass provisioned on EKS (`machine` = instanceType) or GKE (machineType)."""
    field = "instanceType" if provider == "EKS" else "machineType"
    attributes = f", attributes: {{productName: {{string: {product}}}}}" if product else ""
    return f"""
apiVersion: modelplane.ai/v1alpha1
kind: InferenceClass
metadata: {{name: {name}}}
spec:
  provisioning: {{provider: {provider}, {provider.lower()}: {{{field}: {machine},
                 accelerator: {{type: {accelerator}, count: {count}}}}}}}
  devices:
  - {{name: gpu, driver: gpu.nvidia.com, deviceClassName: gpu.nvidia.com, count: {count}{attributes},
     capacity: {{memory: {{value: {memory}}}}}}}
"""


def gang(name: str, engine: str = "vllm", copies: int = 1) -> str:
    """A Leader + 1 Worker vLLM engine claiming 8 GPUs per pod."""
    member = f"nodeSelector: {{devices: [{{name: gpu, count: 8, selectors: [{{cel: '{GPU_CEL}'}}]}}]}}"
    image = "template: {spec: {containers: [{name: engine, image: vllm/vllm-openai:v0.26.0}]}}"
    return f"""
apiVersion: modelplane.ai/v1alpha1
kind: ModelDeployment
metadata: {{name: {name}, namespace: ml-team}}
spec:
  replicas: 1
  template:
    spec:
      engines:
      - name: {engine}
        copies: {copies}
        members:
        - role: Leader
          {member}
          {image}
        - role: Worker
          worker: {{nodes: 1}}
          {member}
          {image}
"""


GPU_REQUEST = "{name: gpu, count: 8, selectors: [{cel: 'device.driver == \"gpu.nvidia.com\"'}]}"
EFA_REQUEST = "{name: efa, count: 16, selectors: [{cel: 'device.driver == \"dra.net\"'}]}"


def dra_efa_class(name: str = "p5en", device_class: str = "efa.networking.k8s.aws") -> str:
    """A p5en.48xlarge class claiming its 16 EFAs through DRANET (dra.net) next to its 8 GPUs."""
    return f"""
apiVersion: modelplane.ai/v1alpha1
kind: InferenceClass
metadata: {{name: {name}}}
spec:
  provisioning: {{provider: EKS, eks: {{instanceType: p5en.48xlarge, accelerator: {{type: nvidia-h200, count: 8}}}}}}
  devices:
  - {{name: gpu, driver: gpu.nvidia.com, deviceClassName: gpu.nvidia.com, count: 8,
     attributes: {{productName: {{string: NVIDIA H200}}}}, capacity: {{memory: {{value: 143771Mi}}}}}}
  - {{name: efa, driver: dra.net, deviceClassName: {device_class}, count: 16}}
"""


def gang_requesting(devices: str, name: str = "llama", selector: str | None = None) -> str:
    """A Leader + 1 Worker engine whose members both request `devices` (YAML flow items)."""
    cluster_selector = f"\n      clusterSelector: {{matchLabels: {selector}}}" if selector else ""
    image = "template: {spec: {containers: [{name: engine, image: vllm/vllm-openai:v0.26.0}]}}"
    return f"""
apiVersion: modelplane.ai/v1alpha1
kind: ModelDeployment
metadata: {{name: {name}, namespace: ml-team}}
spec:
  replicas: 1
  template:
    spec:{cluster_selector}
      engines:
      - name: vllm
        members:
        - role: Leader
          nodeSelector: {{devices: [{devices}]}}
          {image}
        - role: Worker
          worker: {{nodes: 1}}
          nodeSelector: {{devices: [{devices}]}}
          {image}
"""


CLOUD = "---".join([
    gpu_class("p5", "EKS", "p5.48xlarge"),
    gpu_class("g5", "EKS", "g5.48xlarge", accelerator="nvidia-a10g", memory="22Gi"),
    gpu_class("a3-high", "GKE", "a3-highgpu-8g"),
    """
apiVersion: modelplane.ai/v1alpha1
kind: InferenceCluster
metadata: {name: eks-a, labels: {modelplane.ai/region: a}}
spec:
  cluster: {source: EKS, eks: {region: us-east-1}}
  nodePools:
  - {name: efa, className: p5, nodeCount: 4, zones: [us-east-1a], fabric: {type: EFA}}
  - {name: unknown-efa, className: g5, nodeCount: 2, zones: [us-east-1a], fabric: {type: EFA}}
  - {name: block, className: p5, nodeCount: 2, zones: [us-east-1a],
     capacityBlock: {capacityReservationId: cr-0123456789abcdef0}}
---
apiVersion: modelplane.ai/v1alpha1
kind: InferenceCluster
metadata: {name: gke-b, labels: {modelplane.ai/region: b}}
spec:
  cluster: {source: GKE, gke: {region: us-central1}}
  nodePools:
  - {name: a3, className: a3-high, nodeCount: 2, zones: [us-central1-a], fabric: {domain: usc1-a}}
""",
    gang("gang"),
    """
apiVersion: modelplane.ai/v1alpha1
kind: ModelDeployment
metadata: {name: half, namespace: ml-team}
spec:
  replicas: 1
  template:
    spec:
      engines:
      - name: vllm
        members:
        - role: Standalone
          nodeSelector: {devices: [{name: gpu, count: 2, selectors: [{cel: '{cel}'}]}]}
          template: {spec: {containers: [{name: engine, image: vllm/vllm-openai:v0.26.0}]}}
""".replace("{cel}", GPU_CEL),
])


def cloud_fleet(*extra: str) -> Fleet:
    return load_manifest_text("\n---\n".join([CLOUD, *extra]), source="cloud-test")
