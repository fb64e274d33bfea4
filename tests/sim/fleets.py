"""Fleets the sim stack tests write to temp dirs (besides examples/kind and examples/canary)."""

from __future__ import annotations

from pathlib import Path

H100 = """\
apiVersion: modelplane.ai/v1alpha1
kind: InferenceClass
metadata: {{name: {name}}}
spec:
  description: p5.48xlarge, 8 x H100 80GB; the driver publishes 81559Mi each.
  provisioning:
    provider: EKS
    eks: {{instanceType: p5.48xlarge, accelerator: {{type: nvidia-h100-80gb, count: 8}}}}
  devices:
  - name: gpu
    driver: gpu.nvidia.com
    deviceClassName: gpu.nvidia.com
    count: 8
    attributes: {{productName: {{string: {product}}}}}
    capacity: {{memory: {{value: {memory}}}}}
"""
# The name NVML reports for this GPU, what the NVIDIA DRA driver publishes as productName.
NVML_H100 = "NVIDIA H100 80GB HBM3"


def h100(name: str, memory: str = "81559Mi", product: str = NVML_H100) -> str:
    return H100.format(name=name, memory=memory, product=product)

CLUSTER = """\
apiVersion: modelplane.ai/v1alpha1
kind: InferenceCluster
metadata:
  name: {name}
  labels: {{modelplane.ai/region: {name}}}
spec:
  cluster: {source}
  nodePools:
  - {pool}{taints}
"""


def eks_cluster(name: str, cls: str, nodes: int, fabric: str = "") -> str:
    return CLUSTER.format(name=name, source="{source: EKS, eks: {region: us-east-1}}", taints="",
                          pool=f"{{name: h100, className: {cls}, nodeCount: {nodes}, zones: [us-east-1a]{fabric}}}")


# The control-plane gateway on a fleet cluster, so `sim up` starts no control cluster besides.
GATEWAY = """\
apiVersion: modelplane.ai/v1alpha1
kind: InferenceGateway
metadata: {{name: default}}
spec: {{backend: Traefik, traefik: {{version: 41.3.0}}, clusterName: {cluster}}}
"""

ENGINE = "vllm/vllm-openai:v0.26.0"


def _member(role: str, gpus: int, selector: str, extra: str = "") -> str:
    return f"""\
        - role: {role}{extra}
          nodeSelector:
            devices:
            - name: gpu
              count: {gpus}
              selectors: [{{cel: '{selector}'}}]
          template:
            spec:
              containers: [{{name: engine, image: "{ENGINE}"}}]
"""


def _deployment(name: str, replicas: int, engine: str, members: str, copies: int = 1) -> str:
    return f"""\
apiVersion: modelplane.ai/v1alpha1
kind: ModelDeployment
metadata: {{name: {name}, namespace: ml-team}}
spec:
  replicas: {replicas}
  template:
    spec:
      engines:
      - name: {engine}
        copies: {copies}
        members:
{members}"""


def memory_at_least(quantity: str) -> str:
    return f'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("{quantity}")) >= 0'


def gang_fleet(directory: Path) -> Path:
    """One EKS cluster, 8 p5 nodes on an EFA fabric: `llama-405b`, one replica of two copies of a
    Leader + 2-Worker gang (8 GPUs per pod: 3 nodes a copy), and `llama-8b`, two replicas of 4 GPUs
    (device-granular: one node holds both)."""
    usable = memory_at_least("79Gi")
    gang = _member("Leader", 8, usable) + _member("Worker", 8, usable, "\n          worker: {nodes: 2}")
    docs = [
        h100("h100"),
        eks_cluster("gang-east", "h100", 8, ", fabric: {type: EFA, domain: use1}"),
        GATEWAY.format(cluster="gang-east"),
        _deployment("llama-405b", 1, "vllm", gang, copies=2),
        _deployment("llama-8b", 2, "vllm", _member("Standalone", 4, usable)),
    ]
    return _write(directory, docs)


def gotcha_fleet(directory: Path) -> Path:
    """Silent failure 1 (mission) both ways, on two EKS clusters of one p5 node each:
    `nominal-class` selects `>= 80Gi` on cluster `nominal`, whose class declares the nominal 80Gi
    for an H100 (the driver publishes 81559Mi): the fleet scheduler places it, the real
    kube-scheduler cannot allocate its claim. `nominal-selector` selects `>= 80Gi` on cluster
    `usable`, whose class declares the usable 81559Mi: no H100 satisfies it, and the fleet
    scheduler refuses it first."""
    pinned = "\n      clusterSelector: {{matchLabels: {{modelplane.ai/region: {}}}}}"
    docs = [
        h100("h100-nominal", "80Gi"),
        h100("h100"),
        eks_cluster("nominal", "h100-nominal", 1),
        eks_cluster("usable", "h100", 1),
        GATEWAY.format(cluster="usable"),
    ]
    for name, cluster in (("nominal-class", "nominal"), ("nominal-selector", "usable")):
        doc = _deployment(name, 1, "vllm", _member("Standalone", 8, memory_at_least("80Gi")))
        docs.append(doc.replace("\n    spec:\n      engines:", "\n    spec:" + pinned.format(cluster)
                                + "\n      engines:"))
    return _write(directory, docs)


SHORT_NAME_SELECTOR = 'device.attributes["gpu.nvidia.com"].productName == "H100"'


def attribute_gap_fleet(directory: Path) -> Path:
    """The published-device-attributes gotcha on one EKS cluster of one p5 node: class
    `h100-short-name` declares `productName: H100` where the NVIDIA DRA driver publishes NVML's
    `NVIDIA H100 80GB HBM3`, and `short-name` selects `productName == "H100"`. The fleet scheduler
    places it (the class says H100); the real kube-scheduler finds no device of that name."""
    docs = [
        h100("h100-short-name", product="H100"),
        eks_cluster("short-name", "h100-short-name", 1),
        GATEWAY.format(cluster="short-name"),
        _deployment("short-name", 1, "vllm", _member("Standalone", 8, SHORT_NAME_SELECTOR)),
    ]
    return _write(directory, docs)


FAKE_GPU = """\
apiVersion: modelplane.ai/v1alpha1
kind: InferenceClass
metadata: {name: fake-gpu}
spec:
  devices:
  - {name: gpu, claim: DRA, driver: gpu.example.com, deviceClassName: gpu.example.com, count: 1,
     capacity: {memory: {value: 80Gi}}}
"""


def scaling_fleet(directory: Path, replicas: int, drained: str | None = None) -> Path:
    """Two Kind clusters of 3 one-GPU nodes (alpha, beta) and `chat` with `replicas` replicas;
    `drained`: a NoExecute taint on that cluster (its replicas are evicted and placed again)."""
    taint = "\n  taints: [{key: maintenance, value: drain, effect: NoExecute}]"
    docs = [FAKE_GPU, GATEWAY.format(cluster="alpha")]
    docs += [CLUSTER.format(name=c, source='{source: Kind, kind: {nodeImage: "kindest/node:v1.35.1"}}',
                            pool="{name: gpu, className: fake-gpu, nodeCount: 3}", taints=taint if c == drained else "")
             for c in ("alpha", "beta")]
    selector = 'device.capacity["gpu.example.com"].memory.compareTo(quantity("20Gi")) >= 0'
    docs.append(_deployment("chat", replicas, "mock", _member("Standalone", 1, selector)))
    return _write(directory, docs)


def _write(directory: Path, docs: list[str]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "fleet.yaml").write_text("---\n".join(docs))
    return directory
