"""Serving pods on pools a cluster-autoscaler resizes get a PodDisruptionBudget per engine
workload admitting no eviction, so scale-down never breaks a gang or a replica."""

from __future__ import annotations

from modelplane.api import load_manifest_text
from modelplane.plan import plan_fleet
from modelplane.scheduler import place_fleet
from modelplane.vocabulary import LABEL_WORKLOAD

from .cloudfleet import gang, gpu_class
from .schema import validate_any


def _cluster(source: str, pools: str) -> str:
    where = "eks: {region: us-east-1}" if source == "EKS" else "gke: {region: us-central1}"
    return f"""
apiVersion: modelplane.ai/v1alpha1
kind: InferenceCluster
metadata: {{name: c}}
spec:
  cluster: {{source: {source}, {where}}}
  nodePools:
{pools}
"""


def _objects(*docs: str) -> list[dict]:
    fleet = load_manifest_text("---".join(docs))
    return [o for plan in plan_fleet(fleet, place_fleet(fleet)).clusters.values() for o in plan.objects()]


def test_a_gang_on_an_autoscaled_pool_cannot_be_evicted_by_the_cluster_autoscaler_scale_down() -> None:
    """kubernetes/autoscaler cluster-autoscaler/FAQ.md, "What types of pods can prevent CA from
    removing a node?": "Pods with restrictive PodDisruptionBudget"; it otherwise removes nodes
    under --scale-down-utilization-threshold (0.5, DRA devices counted) by evicting their pods.
    kubernetes.io "Specifying a Disruption Budget": pods of arbitrary controllers (LWS, Grove)
    take only an integer minAvailable. Two copies of a Leader + 1 Worker gang: 4 pods."""
    eks = _cluster("EKS", "  - {name: p5, className: p5, nodeCount: 4, maxNodeCount: 8, zones: [us-east-1a]}")
    objects = _objects(gpu_class("p5", "EKS", "p5.48xlarge"), eks, gang("gang", copies=2))
    [budget] = [o for o in objects if o["kind"] == "PodDisruptionBudget"]
    [lws] = [o for o in objects if o["kind"] == "LeaderWorkerSet"]
    name = lws["metadata"]["name"]
    assert budget["metadata"]["name"] == name and budget["metadata"]["namespace"] == "ml-team"
    assert budget["spec"] == {"minAvailable": 4, "selector": {"matchLabels": {LABEL_WORKLOAD: name}}}
    for template in (lws["spec"]["leaderWorkerTemplate"]["leaderTemplate"],
                     lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]):
        assert template["metadata"]["labels"][LABEL_WORKLOAD] == name
    validate_any(budget)


def test_no_budget_where_no_autoscaler_resizes_the_pool() -> None:
    """A budget admitting no eviction would only block node drains where nothing scales down:
    fixed EKS pools (no cluster-autoscaler is installed) get none; a GKE pool with maxNodeCount
    (GKE's autoscaler) does."""
    fixed = _cluster("EKS", "  - {name: p5, className: p5, nodeCount: 4, zones: [us-east-1a]}")
    assert not [o for o in _objects(gpu_class("p5", "EKS", "p5.48xlarge"), fixed, gang("gang"))
                if o["kind"] == "PodDisruptionBudget"]
    gke = _cluster("GKE", "  - {name: a3, className: a3, nodeCount: 2, maxNodeCount: 4, zones: [us-central1-a]}")
    [budget] = [o for o in _objects(gpu_class("a3", "GKE", "a3-highgpu-8g"), gke, gang("gang"))
                if o["kind"] == "PodDisruptionBudget"]
    assert budget["spec"]["minAvailable"] == 2
