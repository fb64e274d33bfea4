import pytest

from modelplane.scheduler import place_fleet

from .fleets import base, deployment, existing_cluster, fleet, messages

CLUSTER = """
apiVersion: modelplane.ai/v1alpha1
kind: InferenceCluster
metadata:
  name: c1
spec:
  cluster:
    source: %(source)s
    %(block)s
  nodePools:
  - name: h100
    className: h100
    nodeCount: 2
    fabric: %(fabric)s
"""
BLOCKS = {"Nebius": "nebius: {}", "EKS": "eks: {region: us-east-1}", "GKE": "gke: {region: us-central1}",
          "AKS": "aks: {location: eastus}", "Existing": "existing: {}"}


def cluster(source: str, fabric: str) -> str:
    return CLUSTER % {"source": source, "block": BLOCKS[source], "fabric": fabric}


@pytest.mark.parametrize("source, fabric", [
    ("Nebius", "{type: InfiniBand, infiniband: {fabric: fabric-3}}"),
    ("AKS", "{type: InfiniBand}"),
    ("EKS", "{type: EFA}"),
    ("Existing", "{type: InfiniBand}"),
    ("GKE", "{type: None}"),
])
def test_fabrics_the_source_provides_pass(source, fabric):
    assert messages(base(cluster=cluster(source, fabric)), "fabric") == []


def test_infiniband_on_nebius_without_settings_fails():
    assert messages(base(cluster=cluster("Nebius", "{type: InfiniBand}")), "fabric") == [
        "[mandatory] fabric: InferenceCluster/c1 (fleet.yaml#1) spec.nodePools[0].fabric.infiniband: pool "
        "'h100' declares fabric InfiniBand on Nebius without fabric.infiniband.fabric: Nebius only joins "
        "nodes to an InfiniBand network through a GPU cluster bound to a named physical fabric, so the pool "
        "would be created without one. Fix: add fabric.infiniband.fabric naming the Nebius fabric of the "
        "region and platform (e.g. fabric-3)."
    ]


def test_efa_outside_eks_fails():
    assert messages(base(cluster=cluster("GKE", "{type: EFA}")), "fabric") == [
        "[mandatory] fabric: InferenceCluster/c1 (fleet.yaml#1) spec.nodePools[0].fabric.type: pool 'h100' "
        "declares fabric EFA, but the cluster's source is GKE and EFA is only available on EKS, Existing "
        "clusters: its nodes get no EFA interfaces and gangs placed here fall back to TCP. Fix: set "
        "fabric.type: None, or declare the pool on a cluster whose source is EKS."
    ]


def test_infiniband_where_the_source_has_none_fails():
    assert messages(base(cluster=cluster("EKS", "{type: InfiniBand}")), "fabric") == [
        "[mandatory] fabric: InferenceCluster/c1 (fleet.yaml#1) spec.nodePools[0].fabric.type: pool 'h100' "
        "declares fabric InfiniBand, but the cluster's source is EKS and InfiniBand is only available on "
        "Nebius, AKS, Existing clusters: its nodes get no InfiniBand interfaces and gangs placed here fall "
        "back to TCP. Fix: set fabric.type: None, or declare the pool on a cluster whose source is Nebius or AKS."
    ]


WORKER = """
        - role: Worker
          worker: {nodes: 1}
          nodeSelector:
            devices:
            - name: gpu
              count: 8
              selectors:
              - cel: device.driver == "gpu.nvidia.com"
          template:
            spec:
              containers:
              - name: engine
                image: vllm/vllm-openai:v0.20.1
"""


def gang() -> str:
    d = deployment().replace("- role: Standalone", "- role: Leader")
    return d.rstrip("\n") + "\n" + WORKER.strip("\n") + "\n"


def test_multi_node_engine_on_a_fabric_pool_passes():
    docs = base(deployment=gang(), cluster=existing_cluster(fabric="InfiniBand"))
    assert messages(docs, "fabric-multi-node-tcp") == []


def test_single_node_engine_on_a_pool_without_fabric_passes():
    assert messages(base(), "fabric-multi-node-tcp") == []


def test_multi_node_engine_on_a_pool_without_fabric_is_advisory():
    docs = base(deployment=gang())
    replica = place_fleet(fleet(*docs)).deployments[0].replicas[0].name
    assert messages(docs, "fabric-multi-node-tcp") == [
        "[advisory] fabric-multi-node-tcp: ModelDeployment/ml-team/llama (fleet.yaml#2) "
        "spec.template.spec.engines[0].members[1].worker.nodes: engine 'vllm' spans a Leader and 1 Worker "
        f"node(s), and replica '{replica}' is placed on pool 'h100' of InferenceCluster/byo, whose fabric is "
        "None: tensor-parallel traffic between its nodes will be capped by TCP. Fix: give that pool an RDMA "
        "fabric (spec.nodePools[].fabric.type EFA on EKS, InfiniBand on Nebius/AKS), steer the deployment to "
        "a pool that has one with clusterSelector, or fit the engine on one node."
    ]
