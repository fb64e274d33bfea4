"""Reference-style manifests for the check tests, written for these tests (shapes follow
the reference's docs manifests: a BYO H100 class, an Existing cluster, a vLLM deployment)."""

from __future__ import annotations

import textwrap

from modelplane.api import load_manifest_text
from modelplane.checks import run_checks

H100_CLASS = """
apiVersion: modelplane.ai/v1alpha1
kind: InferenceClass
metadata:
  name: h100
spec:
  description: 8x H100 80GB with InfiniBand NICs, bring-your-own nodes.
  devices:
  - name: gpu
    driver: gpu.nvidia.com
    deviceClassName: gpu.nvidia.com
    count: 8
    attributes:
      productName: {string: NVIDIA H100 80GB HBM3}
      architecture: {string: Hopper}
      cudaComputeCapability: {version: 9.0.0}
    capacity:
      memory: {value: %(memory)s}
  - name: nic
    claim: Synthetic
    driver: nic.nvidia.com
    count: 8
    attributes:
      linkType: {string: infiniband}
"""

EXISTING_CLUSTER = """
apiVersion: modelplane.ai/v1alpha1
kind: InferenceCluster
metadata:
  name: byo
  labels:
    modelplane.ai/region: us-east
spec:
  cluster:
    source: Existing
    existing: {}
  nodePools:
  - name: h100
    className: h100
    nodeCount: %(nodes)s
    poolLabel: {mode: Present}
    fabric: {type: %(fabric)s}
"""

DEPLOYMENT = """
apiVersion: modelplane.ai/v1alpha1
kind: ModelDeployment
metadata:
  name: llama
  namespace: ml-team
spec:
  replicas: %(replicas)s
  template:
    spec:
      engines:
      - name: vllm
        members:
        - role: Standalone
          nodeSelector:
            devices:
            - name: gpu
              count: 8
              selectors:
              - cel: %(cel)s
          template:
            spec:
              containers:
              - name: engine
                image: vllm/vllm-openai:v0.20.1
                args: [meta-llama/Llama-3.1-8B-Instruct, --tensor-parallel-size, "8"]
"""

GOOD_CEL = 'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("79Gi")) >= 0'
NOMINAL_CEL = 'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("80Gi")) >= 0'


def h100_class(memory: str = "81559Mi") -> str:
    return H100_CLASS % {"memory": memory}


def existing_cluster(nodes: int = 2, fabric: str = "None") -> str:
    return EXISTING_CLUSTER % {"nodes": nodes, "fabric": fabric}


def deployment(cel: str = GOOD_CEL, replicas: int = 1) -> str:
    return DEPLOYMENT % {"cel": "'" + cel + "'", "replicas": replicas}


def base(**overrides: str) -> list[str]:
    """The passing fleet: one usable-memory H100 class, one labelled Existing cluster,
    one deployment that fits."""
    docs = {"class": h100_class(), "cluster": existing_cluster(), "deployment": deployment()}
    docs.update(overrides)
    return [d for d in docs.values() if d]


def fleet(*docs: str):
    return load_manifest_text("---".join(textwrap.dedent(d) for d in docs), source="fleet.yaml")


def findings(docs, policy: str | None = None, **kwargs):
    got = run_checks(fleet(*docs), **kwargs)
    return [f for f in got if policy is None or f.policy == policy]


def messages(docs, policy: str, **kwargs) -> list[str]:
    return [str(f) for f in findings(docs, policy, **kwargs)]
