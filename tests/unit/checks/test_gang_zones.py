"""gang-zone-capacity: a gang copy's pods share a zone (the renderers' pod affinity), so its
nodes must fit in one zone of its pool. EC2 Auto Scaling spreads a group evenly over its
Availability Zones ("Availability Zone rebalancing"); a fixed GKE pool holds nodeCount/zones
per zone (google_container_node_pool `node_count`: "number of nodes per instance group")."""

from __future__ import annotations

from tests.unit.render.cloudfleet import gpu_class

from .fleets import base, messages
from .test_cloud_checks import GANG

POLICY = "gang-zone-capacity"


def _cluster(source: str, pool: str) -> str:
    block = ("{source: EKS, eks: {region: us-east-1}}" if source == "EKS"
             else "{source: GKE, gke: {region: us-central1}}")
    return f"""
apiVersion: modelplane.ai/v1alpha1
kind: InferenceCluster
metadata: {{name: c1}}
spec:
  cluster: {block}
  nodePools: [{{name: h100, className: h100, {pool}}}]
"""


def _docs(source: str, pool: str) -> list[str]:
    provider, machine = ("EKS", "p5.48xlarge") if source == "EKS" else ("GKE", "a3-ultragpu-8g")
    return base(**{"class": gpu_class("h100", provider, machine, product="NVIDIA H100 80GB HBM3"),
                   "cluster": _cluster(source, pool), "deployment": GANG})


def test_a_gang_copy_larger_than_any_zone_of_its_pool_is_refused() -> None:
    got = messages(_docs("GKE", "nodeCount: 2, zones: [us-central1-a, us-central1-b]"), POLICY)
    assert got == [
        "[mandatory] gang-zone-capacity: ModelDeployment/ml-team/llama (fleet.yaml#2) spec.template.spec.engines[0]: "
        "one copy of engine 'vllm' needs 2 node(s) of pool 'h100' of InferenceCluster/c1, and its pods must share a "
        "zone, but the pool's 2 node(s) spread over 2 zones (us-central1-a, us-central1-b) hold at most 1 in any "
        "one, so the copy never schedules. Fix: list one zone for the pool (spec.nodePools[].zones), give it "
        "enough nodes per zone, or shrink the gang."]
    eks = messages(_docs("EKS", "nodeCount: 2, zones: [us-east-1a, us-east-1b]"), POLICY)
    assert len(eks) == 1 and "hold at most 1 in any one" in eks[0]


def test_a_gang_copy_that_fits_in_one_zone_passes() -> None:
    for source, pool in (("GKE", "nodeCount: 4, zones: [us-central1-a, us-central1-b]"),
                         ("EKS", "nodeCount: 3, zones: [us-east-1a, us-east-1b]"),
                         ("EKS", "nodeCount: 2, zones: [us-east-1a]"),
                         ("GKE", "nodeCount: 2, maxNodeCount: 4, zones: [us-central1-a, us-central1-b]")):
        assert messages(_docs(source, pool), POLICY) == [], (source, pool)
