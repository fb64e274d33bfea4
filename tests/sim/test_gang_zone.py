"""A multi-node gang's pods land in one zone (issue 21 item 9), on a real kube-scheduler with the
LeaderWorkerSet controller: two copies of a Leader + Worker gang on an EKS-shaped pool of four
nodes, two in each of two zones (render side); and plan and cluster agree on zones (scheduler
side): the gang the scheduler refuses on a pool of one node per zone (ZoneShortfall) stays
Pending there when applied anyway, and the ones it places on the two-per-zone pool schedule."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from modelplane.api import load_manifests
from modelplane.plan import plan_fleet
from modelplane.scheduler import place_fleet
from modelplane.scheduler.reasons import ZONE_SHORTFALL
from sim import KubeClient, SimFleet
from tests import manifests as g

pytestmark = [pytest.mark.sim]

ZONE = "topology.kubernetes.io/zone"
GROUP = "leaderworkerset.sigs.k8s.io/group-index"
WORKLOAD = "modelplane.ai/workload"
H100 = {"productName": {"string": "NVIDIA H100 80GB HBM3"}}


def _fleet(directory: Path) -> Path:
    usable = g.mem_at_least("79Gi")
    gang = g.engine("vllm", g.member("Leader", g.request("gpu", 8, usable)),
                    g.member("Worker", g.request("gpu", 8, usable), nodes=1), copies=2)
    docs = [g.inference_class("h100", g.device("gpu", 8, "81559Mi", attributes=H100)),
            g.cluster("zonal", g.pool("gpu", "h100", 4, zones=["us-east-1a", "us-east-1b"]),
                      source={"source": "EKS", "eks": {"region": "us-east-1"}}),
            g.deployment("gang", 1, gang, namespace="ml-team")]
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "fleet.yaml").write_text(g.to_yaml(docs))
    return directory


def _scheduled(kube: KubeClient, want: int, timeout: float = 120) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout
    while True:
        pods = [p for p in kube.items("/api/v1/namespaces/ml-team/pods") if p["spec"].get("nodeName")]
        if len(pods) >= want or time.monotonic() > deadline:
            return pods
        time.sleep(1)


@pytest.mark.timeout(600)
def test_each_copy_of_a_gang_runs_in_one_zone_on_the_real_scheduler(
        start_fleet: Callable[..., tuple[SimFleet, dict[str, Path]]], tmp_path: Path) -> None:
    """kube-scheduler v1.36 InterPodAffinity with the rendered term (matchLabelKeys on the LWS
    group index, topologyKey zone): without it the default topology spread puts a copy's leader
    and worker in different zones when it can."""
    manifests = _fleet(tmp_path / "fleet")
    fleet = load_manifests(manifests)
    objects = plan_fleet(fleet, place_fleet(fleet)).clusters["zonal"].objects()
    _, kubeconfigs = start_fleet(manifests)
    with KubeClient.from_kubeconfig(kubeconfigs["zonal"]) as kube:
        for obj in objects:
            kube.create(obj, exist_ok=True)
        pods = _scheduled(kube, 4)
        assert len(pods) == 4, [p["metadata"]["name"] for p in pods]
        zones = {n["metadata"]["name"]: n["metadata"]["labels"][ZONE] for n in kube.items("/api/v1/nodes")
                 if ZONE in n["metadata"]["labels"]}
    by_copy: dict[str, set[str]] = defaultdict(set)
    for pod in pods:
        by_copy[pod["metadata"]["labels"][GROUP]].add(zones[pod["spec"]["nodeName"]])
    assert len(by_copy) == 2 and all(len(z) == 1 for z in by_copy.values()), dict(by_copy)


def _two_clusters(directory: Path, split_zones: list[str]) -> Path:
    """`split`: an EKS pool of two nodes over `split_zones`; `zonal`: four nodes over two zones;
    a 2-node gang (leader + one worker, 8 GPUs each) with three replicas."""
    usable = g.mem_at_least("79Gi")
    gang = g.engine("vllm", g.member("Leader", g.request("gpu", 8, usable)),
                    g.member("Worker", g.request("gpu", 8, usable), nodes=1))
    eks = {"source": "EKS", "eks": {"region": "us-east-1"}}
    docs = [g.inference_class("h100", g.device("gpu", 8, "81559Mi", attributes=H100)),
            g.cluster("split", g.pool("gpu", "h100", 2, zones=split_zones), source=eks),
            g.cluster("zonal", g.pool("gpu", "h100", 4, zones=["us-east-1a", "us-east-1b"]), source=eks),
            g.deployment("gang", 3, gang, namespace="ml-team")]
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "fleet.yaml").write_text(g.to_yaml(docs))
    return directory


def _one_scheduled_one_stuck(kube: KubeClient, timeout: float = 120
                             ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(scheduled pods, pods kube-scheduler marked Unschedulable), once one copy's pod has a node
    and another is marked Unschedulable, or at the timeout."""
    deadline = time.monotonic() + timeout
    while True:
        pods = kube.items("/api/v1/namespaces/ml-team/pods")
        running = [p for p in pods if p["spec"].get("nodeName")]
        stuck = [p for p in pods if not p["spec"].get("nodeName") and any(
            c.get("type") == "PodScheduled" and c.get("reason") == "Unschedulable"
            for c in p.get("status", {}).get("conditions", []))]
        if (running and stuck) or time.monotonic() > deadline:
            return running, stuck
        time.sleep(1)


@pytest.mark.timeout(600)
def test_plan_and_cluster_agree_on_gang_zones(
        start_fleet: Callable[..., tuple[SimFleet, dict[str, Path]]], tmp_path: Path) -> None:
    """The plan places two copies on `zonal` (one per zone) and refuses `split` with
    ZoneShortfall; on the real clusters those two schedule, each in one zone, and the objects
    of a placement on `split` (as a plan that believed its pool in one zone would make them)
    leave the worker Pending: kube-scheduler finds no node in the leader's zone."""
    manifests = _two_clusters(tmp_path / "fleet", ["us-east-1a", "us-east-1b"])
    fleet = load_manifests(manifests)
    placement = place_fleet(fleet)
    placed = placement.by_key()[("ml-team", "gang")]
    assert sorted(r.cluster for r in placed.replicas) == ["zonal", "zonal"]
    assert sorted(r.engines["vllm"].zones for r in placed.replicas) == [("us-east-1a",), ("us-east-1b",)]
    refusal = placed.unplaced[0].reasons["split"]
    assert refusal.code == ZONE_SHORTFALL and "us-east-1a: 8 of 8, us-east-1b: 8 of 8" in refusal.message, refusal
    zonal_objects = plan_fleet(fleet, placement).clusters["zonal"].objects()
    # what a zone-blind plan would put on `split`: the same fleet with its pool in one zone
    believed = load_manifests(_two_clusters(tmp_path / "believed", ["us-east-1a"]))
    blind = place_fleet(believed)
    assert any(r.cluster == "split" for r in blind.by_key()[("ml-team", "gang")].replicas)
    split_objects = plan_fleet(believed, blind).clusters["split"].objects()
    _, kubeconfigs = start_fleet(manifests)
    with KubeClient.from_kubeconfig(kubeconfigs["zonal"]) as kube:
        for obj in zonal_objects:
            kube.create(obj, exist_ok=True)
        pods = _scheduled(kube, 4)
        assert len(pods) == 4, [p["metadata"]["name"] for p in pods]
        zones = {n["metadata"]["name"]: n["metadata"]["labels"][ZONE] for n in kube.items("/api/v1/nodes")
                 if ZONE in n["metadata"]["labels"]}
        # two replicas, so two LeaderWorkerSets, each with its copy 0
        per_copy: dict[tuple[str, str], set[str]] = defaultdict(set)
        for pod in pods:
            labels = pod["metadata"]["labels"]
            per_copy[(labels[WORKLOAD], labels[GROUP])].add(zones[pod["spec"]["nodeName"]])
        assert len(per_copy) == 2 and all(len(z) == 1 for z in per_copy.values()), dict(per_copy)
        assert sorted(z for zs in per_copy.values() for z in zs) == ["us-east-1a", "us-east-1b"], dict(per_copy)
    with KubeClient.from_kubeconfig(kubeconfigs["split"]) as kube:
        split_zones = sorted({n["metadata"]["labels"].get(ZONE) for n in kube.items("/api/v1/nodes")} - {None})
        for obj in split_objects:
            kube.create(obj, exist_ok=True)
        running, stuck = _one_scheduled_one_stuck(kube)
        time.sleep(5)                                # the stuck one stays stuck
        later = [p for p in kube.items("/api/v1/namespaces/ml-team/pods") if p["spec"].get("nodeName")]
    assert split_zones == ["us-east-1a", "us-east-1b"], split_zones
    assert len(running) == 1 and len(later) == 1, [p["metadata"]["name"] for p in later]
    assert stuck, "the copy split across zones scheduled: the scheduler's refusal disagrees with the cluster"
    why = next(c["message"] for c in stuck[0]["status"]["conditions"] if c.get("type") == "PodScheduled")
    assert "affinity" in why, why
