"""A multi-node gang's pods land in one zone (issue 21 item 9, render side), on a real
kube-scheduler with the LeaderWorkerSet controller: two copies of a Leader + Worker gang on an
EKS-shaped pool of four nodes, two in each of two zones."""

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
from sim import KubeClient, SimFleet
from tests import manifests as g

pytestmark = [pytest.mark.sim]

ZONE = "topology.kubernetes.io/zone"
GROUP = "leaderworkerset.sigs.k8s.io/group-index"
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
