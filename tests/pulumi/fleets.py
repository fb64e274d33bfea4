"""Small fleets for the provider and program tests, as manifest text."""

from __future__ import annotations

CLASS = """
apiVersion: modelplane.ai/v1alpha1
kind: InferenceClass
metadata: {name: fake-gpu}
spec:
  devices:
  - {name: gpu, driver: gpu.example.com, deviceClassName: gpu.example.com, count: 1,
     capacity: {memory: {value: 80Gi}}}
"""

CLUSTER = """
apiVersion: modelplane.ai/v1alpha1
kind: InferenceCluster
metadata:
  name: {name}
  labels: {{modelplane.ai/region: {name}}}
spec:
  cluster: {{source: Kind}}
  taints: {taints}
  nodePools:
  - {{name: gpu, className: fake-gpu, nodeCount: {nodes}}}
"""

DEPLOYMENT = """
apiVersion: modelplane.ai/v1alpha1
kind: ModelDeployment
metadata: {{name: {name}, namespace: ml-team}}
spec:
  replicas: {replicas}
  template:
    spec:
      engines:
      - name: mock
        copies: {copies}
        members:
        - role: Standalone
          nodeSelector:
            devices:
            - name: gpu
              selectors:
              - cel: device.capacity["gpu.example.com"].memory.compareTo(quantity("20Gi")) >= 0
          template:
            spec:
              containers: [{{name: engine, image: python:3.12-alpine}}]
"""

SERVICE = """
apiVersion: modelplane.ai/v1alpha1
kind: ModelService
metadata: {name: chat, namespace: ml-team}
spec:
  endpoints:
  - {name: stable, weight: 90, selector: {matchLabels: {modelplane.ai/deployment: chat}}}
  - {name: canary, weight: 10, selector: {matchLabels: {modelplane.ai/deployment: chat-canary}}}
"""


def fleet_text(clusters: dict[str, int], deployments: dict[str, int], copies: int = 1,
               tainted: dict[str, str] | None = None, service: bool = False) -> str:
    """`clusters`: name -> nodes; `deployments`: name -> replicas; `tainted`: cluster -> effect."""
    docs = [CLASS]
    for name, nodes in clusters.items():
        effect = (tainted or {}).get(name)
        taints = f"[{{key: maintenance, effect: {effect}}}]" if effect else "[]"
        docs.append(CLUSTER.format(name=name, nodes=nodes, taints=taints))
    docs += [DEPLOYMENT.format(name=n, replicas=r, copies=copies) for n, r in deployments.items()]
    if service:
        docs.append(SERVICE)
    return "---".join(docs)


def documents(text: str) -> list[dict]:
    from modelplane.api import load_manifest_text

    return load_manifest_text(text).to_documents()
