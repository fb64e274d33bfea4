"""A gang copy's pods share a zone (the renderers' pod affinity), so its nodes must fit in one zone
of its pool. EC2 Auto Scaling spreads a group evenly over its Availability Zones ("Availability
Zone rebalancing"); a fixed GKE pool holds nodeCount/zones per zone (google_container_node_pool
`node_count`: "the number of nodes per instance group").

There is no check of its own for it: the scheduler refuses such a placement (the gang-zones plugin,
ZoneShortfall), so `lint` and the pack refuse the fleet through `replicas-fully-scheduled`
(mandatory), which carries the scheduler's reason."""

from __future__ import annotations

from modelplane.checks import CHECKS
from tests.unit.render.cloudfleet import gpu_class

from .fleets import base, findings, messages
from .test_cloud_checks import GANG

POLICY = "replicas-fully-scheduled"


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


def test_a_gang_copy_larger_than_any_zone_of_its_pool_fails_lint_with_the_zone_shortfall() -> None:
    got = messages(_docs("GKE", "nodeCount: 2, zones: [us-central1-a, us-central1-b]"), POLICY)
    assert len(got) == 1, got
    assert got[0].startswith("[mandatory] replicas-fully-scheduled: ModelDeployment/ml-team/llama")
    assert ("c1: engine vllm: a copy needs 16 devices on 2 nodes in one zone of pool h100; its zones have at "
            "most 8 devices free (us-central1-a: 8 of 8, us-central1-b: 8 of 8)") in got[0], got[0]
    eks = messages(_docs("EKS", "nodeCount: 3, zones: [us-east-1a, us-east-1b]"), POLICY)
    assert len(eks) == 1 and "(us-east-1a: 8 of 8, us-east-1b: 8 of 8)" in eks[0], eks


def test_a_gang_copy_that_fits_in_one_zone_passes() -> None:
    for source, pool in (("GKE", "nodeCount: 4, zones: [us-central1-a, us-central1-b]"),
                         ("EKS", "nodeCount: 4, zones: [us-east-1a, us-east-1b]"),
                         ("EKS", "nodeCount: 2, zones: [us-east-1a]"),
                         ("GKE", "nodeCount: 2, maxNodeCount: 4, zones: [us-central1-a, us-central1-b]")):
        assert messages(_docs(source, pool), POLICY) == [], (source, pool)
        assert [f for f in findings(_docs(source, pool)) if f.level == "mandatory"] == [], (source, pool)


def test_the_zone_rule_has_one_home_the_scheduler() -> None:
    """The old `gang-zone-capacity` check re-derived per-zone capacity beside the scheduler; it
    could only fire on a placement the scheduler no longer makes."""
    assert "gang-zone-capacity" not in CHECKS and POLICY in CHECKS
