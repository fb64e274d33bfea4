"""A fleet shaped like the real aws and gcp stacks: EKS p5 pools (EFA, capacity block), GKE
A3 pools, NVIDIA DRA classes with provisioning blocks."""

from __future__ import annotations

from modelplane.api import Fleet, load_manifest_text

GPU_CEL = 'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("79Gi")) >= 0'

CLOUD = """
apiVersion: modelplane.ai/v1alpha1
kind: InferenceClass
metadata: {name: p5}
spec:
  provisioning: {provider: EKS, eks: {instanceType: p5.48xlarge, accelerator: {type: nvidia-h100-80gb, count: 8}}}
  devices:
  - {name: gpu, driver: gpu.nvidia.com, deviceClassName: gpu.nvidia.com, count: 8,
     capacity: {memory: {value: 81559Mi}}}
---
apiVersion: modelplane.ai/v1alpha1
kind: InferenceClass
metadata: {name: g5}
spec:
  provisioning: {provider: EKS, eks: {instanceType: g5.48xlarge, accelerator: {type: nvidia-a10g, count: 8}}}
  devices:
  - {name: gpu, driver: gpu.nvidia.com, deviceClassName: gpu.nvidia.com, count: 8,
     capacity: {memory: {value: 22Gi}}}
---
apiVersion: modelplane.ai/v1alpha1
kind: InferenceClass
metadata: {name: a3-high}
spec:
  provisioning: {provider: GKE, gke: {machineType: a3-highgpu-8g, accelerator: {type: nvidia-h100-80gb, count: 8}}}
  devices:
  - {name: gpu, driver: gpu.nvidia.com, deviceClassName: gpu.nvidia.com, count: 8,
     capacity: {memory: {value: 81559Mi}}}
---
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
---
apiVersion: modelplane.ai/v1alpha1
kind: ModelDeployment
metadata: {name: gang, namespace: ml-team}
spec:
  replicas: 1
  template:
    spec:
      engines:
      - name: vllm
        members:
        - role: Leader
          nodeSelector: {devices: [{name: gpu, count: 8, selectors: [{cel: '{cel}'}]}]}
          template: {spec: {containers: [{name: engine, image: vllm/vllm-openai:v0.26.0}]}}
        - role: Worker
          worker: {nodes: 1}
          nodeSelector: {devices: [{name: gpu, count: 8, selectors: [{cel: '{cel}'}]}]}
          template: {spec: {containers: [{name: engine, image: vllm/vllm-openai:v0.26.0}]}}
---
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
""".replace("{cel}", GPU_CEL)


def cloud_fleet(*extra: str) -> Fleet:
    return load_manifest_text("\n---\n".join([CLOUD, *extra]), source="cloud-test")
