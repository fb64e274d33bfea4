"""Reference-style fleets and hand-built placements for the renderer tests.

Replicas are placed by hand so these tests pin what the renderers draw, never what the
scheduler decides.
"""

from __future__ import annotations

from modelplane.api import load_manifest_text
from modelplane.naming import replica_name
from modelplane.scheduler import EnginePlacement, PlacedReplica, resolve_member_requests

PLATFORM = """
apiVersion: modelplane.ai/v1alpha1
kind: InferenceClass
metadata: {name: fake-gpu}
spec:
  devices:
  - name: gpu
    driver: gpu.example.com
    deviceClassName: gpu.example.com
    count: 2
    capacity: {memory: {value: 80Gi}}
---
apiVersion: modelplane.ai/v1alpha1
kind: InferenceClass
metadata: {name: h100-ib}
spec:
  devices:
  - name: gpu
    driver: gpu.nvidia.com
    deviceClassName: gpu.nvidia.com
    count: 8
    attributes: {architecture: {string: Hopper}}
    capacity: {memory: {value: 81559Mi}}
  - name: nic
    claim: Synthetic
    driver: nic.nvidia.com
    count: 8
    attributes: {linkType: {string: infiniband}}
---
apiVersion: modelplane.ai/v1alpha1
kind: InferenceCluster
metadata: {name: kind-a, labels: {modelplane.ai/region: a}}
spec:
  cluster: {source: Kind}
  nodePools: [{name: gpu, className: fake-gpu, nodeCount: 4}]
---
apiVersion: modelplane.ai/v1alpha1
kind: InferenceCluster
metadata: {name: dynamo-b, labels: {modelplane.ai/region: b}}
spec:
  stack: Dynamo
  cluster: {source: EKS, eks: {region: us-east-1}}
  nodePools:
  - {name: h100, className: h100-ib, nodeCount: 6, zones: [us-east-1a], fabric: {type: EFA}}
  - {name: small, className: fake-gpu, nodeCount: 2, zones: [us-east-1a]}
---
apiVersion: modelplane.ai/v1alpha1
kind: InferenceCluster
metadata: {name: eks-g, labels: {modelplane.ai/region: g}}
spec:
  cluster: {source: EKS, eks: {region: us-west-2}}
  nodePools:
  - {name: h100, className: h100-ib, nodeCount: 8, zones: [us-west-2a], fabric: {type: EFA}}
  - {name: small, className: fake-gpu, nodeCount: 2, zones: [us-west-2a]}
---
apiVersion: modelplane.ai/v1alpha1
kind: InferenceCluster
metadata: {name: gke-c, labels: {modelplane.ai/region: c}}
spec:
  cluster: {source: GKE, gke: {region: europe-west4}}
  nodePools: [{name: gpu, className: fake-gpu, nodeCount: 2, zones: [europe-west4-a]}]
---
apiVersion: modelplane.ai/v1alpha1
kind: InferenceCluster
metadata: {name: byo-d, labels: {modelplane.ai/region: d}}
spec:
  cluster:
    source: Existing
    existing: {cache: {storageClassName: nfs-rwx}}
  nodePools: [{name: gpu, className: fake-gpu, nodeCount: 2}]
---
apiVersion: modelplane.ai/v1alpha1
kind: InferenceCluster
metadata: {name: byo-nocache, labels: {modelplane.ai/region: e}}
spec:
  cluster: {source: Existing, existing: {}}
  nodePools: [{name: gpu, className: fake-gpu, nodeCount: 2}]
---
apiVersion: modelplane.ai/v1alpha1
kind: InferenceCluster
metadata: {name: vultr-f, labels: {modelplane.ai/region: f}}
spec:
  cluster: {source: Vultr, vultr: {region: ewr}}
  nodePools: [{name: gpu, className: fake-gpu, nodeCount: 2}]
"""

CACHES = """
apiVersion: modelplane.ai/v1alpha1
kind: ModelCache
metadata: {name: qwen, namespace: ml-team}
spec:
  source: HuggingFace
  huggingFace:
    repo: Qwen/Qwen3-0.6B
    revision: c1899de289a04d12100db370d81485cdf75e47ca
    sizeGiB: 20
    authSecret: {name: hf-token}
  clusterSelector: {matchLabels: {modelplane.ai/region: a}}
---
apiVersion: modelplane.ai/v1alpha1
kind: ModelCache
metadata: {name: llama, namespace: ml-team}
spec:
  source: HuggingFace
  huggingFace: {repo: meta-llama/Llama-3.1-70B, sizeGiB: 200}
"""

GPU_SELECTOR = 'device.capacity["gpu.example.com"].memory.compareTo(quantity("20Gi")) >= 0'

STANDALONE = f"""
apiVersion: modelplane.ai/v1alpha1
kind: ModelDeployment
metadata: {{name: chat, namespace: ml-team}}
spec:
  replicas: 2
  template:
    spec:
      modelCacheRef: {{name: qwen}}
      engines:
      - name: vllm
        copies: 2
        members:
        - role: Standalone
          nodeSelector:
            devices:
            - name: gpu
              count: 1
              selectors: [{{cel: '{GPU_SELECTOR}'}}]
          template:
            metadata:
              labels: {{example.org/team: search}}
              annotations: {{example.org/owner: alice}}
            spec:
              imagePullSecrets: [{{name: regcred}}]
              containers:
              - name: engine
                image: vllm/vllm-openai:v0.20.1
                args: [Qwen/Qwen3-0.6B, --served-model-name, $(MODELPLANE_SERVED_MODEL_NAME)]
                env:
                - {{name: VLLM_LOGGING_LEVEL, value: DEBUG}}
                - {{name: HF_HUB_OFFLINE, value: "0"}}
                - {{name: MODELPLANE_SERVED_MODEL_NAME, value: spoofed}}
"""

GANG = """
apiVersion: modelplane.ai/v1alpha1
kind: ModelDeployment
metadata: {name: big, namespace: research}
spec:
  replicas: 1
  template:
    spec:
      modelCacheRef: {name: llama}
      engines:
      - name: tp16
        copies: 2
        members:
        - role: Leader
          template:
            spec:
              containers:
              - name: engine
                image: vllm/vllm-openai:v0.20.1
                args: [meta-llama/Llama-3.1-70B, --revision, v2, --load-format=safetensors]
        - role: Worker
          worker: {nodes: 3}
          nodeSelector:
            devices:
            - name: gpu
              count: 8
              selectors: [{cel: 'device.attributes["gpu.nvidia.com"].architecture == "Hopper"'}]
            - name: ib
              count: 8
              selectors: [{cel: 'device.attributes["nic.nvidia.com"].linkType == "infiniband"'}]
          template:
            spec:
              containers:
              - name: engine
                image: vllm/vllm-openai:v0.20.1
                command: [/bin/sh, -c]
                args: ['vllm serve meta-llama/Llama-3.1-70B --headless --revision $(MODELPLANE_MODEL_REVISION)']
"""

# The same model: a cache in research too, so GANG's reference resolves.
RESEARCH_CACHE = """
apiVersion: modelplane.ai/v1alpha1
kind: ModelCache
metadata: {name: llama, namespace: research}
spec:
  source: HuggingFace
  huggingFace: {repo: meta-llama/Llama-3.1-70B, revision: v2, sizeGiB: 200}
"""

KV_CONSUMER = """'{"kv_connector":"NixlConnector","kv_role":"kv_consumer"}'"""
KV_PRODUCER = """'{"kv_connector":"NixlConnector","kv_role":"kv_producer"}'"""
PREFILL_DECODE = f"""
apiVersion: modelplane.ai/v1alpha1
kind: ModelDeployment
metadata: {{name: pd, namespace: ml-team}}
spec:
  replicas: 1
  template:
    spec:
      serving: {{mode: PrefillDecode}}
      engines:
      - name: decode
        phase: Decode
        copies: 1
        members:
        - nodeSelector:
            devices: [{{name: gpu, selectors: [{{cel: '{GPU_SELECTOR}'}}]}}]
          template:
            spec:
              containers:
              - name: engine
                image: vllm/vllm-openai:v0.20.1
                args: [Qwen/Qwen3-0.6B, --kv-transfer-config, {KV_CONSUMER}]
                env: [{{name: VLLM_NIXL_SIDE_CHANNEL_PORT, value: "5600"}}]
      - name: prefill
        phase: Prefill
        copies: 3
        members:
        - nodeSelector:
            devices: [{{name: gpu, selectors: [{{cel: '{GPU_SELECTOR}'}}]}}]
          template:
            spec:
              containers:
              - name: engine
                image: vllm/vllm-openai:v0.20.1
                args: [Qwen/Qwen3-0.6B, --kv-transfer-config, {KV_PRODUCER}]
"""

TWO_STANDALONE = f"""
apiVersion: modelplane.ai/v1alpha1
kind: ModelDeployment
metadata: {{name: duo, namespace: default}}
spec:
  replicas: 1
  template:
    spec:
      engines:
      - name: a
        members:
        - nodeSelector:
            devices: [{{name: gpu, selectors: [{{cel: '{GPU_SELECTOR}'}}]}}]
          template:
            spec:
              containers: [{{name: engine, image: ghcr.io/example/engine:1, command: [serve]}}]
      - name: b
        members:
        - nodeSelector:
            devices: [{{name: gpu, selectors: [{{cel: '{GPU_SELECTOR}'}}]}}]
          template:
            spec:
              containers: [{{name: engine, image: ghcr.io/example/engine:1, command: [serve]}}]
"""


def fleet(*docs: str):
    return load_manifest_text("\n---\n".join([PLATFORM, *docs]), source="render-test")


def full_fleet():
    return fleet(CACHES, RESEARCH_CACHE, STANDALONE, GANG, PREFILL_DECODE, TWO_STANDALONE)


def place(fl, namespace: str, name: str, cluster: str, index: int = 0,
          pools: dict[str, tuple[str, ...]] | None = None) -> PlacedReplica:
    """A replica of every engine, each member on the cluster's first pool unless `pools` says,
    with the device requests the scheduler resolves there recorded, as it records them
    (none for an engine it could not resolve: the renderer must refuse that)."""
    dep = fl.deployments[(namespace, name)]
    first = fl.clusters[cluster].spec.node_pools[0].name
    engines = {}
    for engine in dep.spec.template.spec.engines:
        members = (pools or {}).get(engine.name, (first,) * len(engine.members))
        pool_class = {p.name: p.class_name for p in fl.clusters[cluster].spec.node_pools}
        try:
            requests = tuple(tuple(resolve_member_requests(fl, dep, engine.name, i, pool_class[p]))
                             for i, p in enumerate(members))
        except (KeyError, AttributeError):
            requests = ()
        engines[engine.name] = EnginePlacement(members[-1], tuple(members), requests)
    return PlacedReplica(replica_name(name, cluster, index), index, cluster, engines)


def by_kind(objects: list[dict], kind: str) -> list[dict]:
    return [o for o in objects if o["kind"] == kind]


def one(objects: list[dict], kind: str) -> dict:
    found = by_kind(objects, kind)
    assert len(found) == 1, f"expected one {kind}, got {[o['metadata']['name'] for o in found]}"
    return found[0]


def env_names(container: dict) -> list[str]:
    return [e["name"] for e in container.get("env", [])]


def env_map(container: dict) -> dict[str, dict]:
    return {e["name"]: e for e in container.get("env", [])}
