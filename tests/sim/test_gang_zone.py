"""A multi-node gang's pods land in one zone (issue 21 item 9), on a real kube-scheduler with the
LeaderWorkerSet controller: two copies of a Leader + Worker gang on an EKS-shaped pool of four
nodes, two in each of two zones (render side); and plan and cluster agree on zones (scheduler
side): the gang the scheduler refuses on a pool of one node per zone (ZoneShortfall) stays
Pending there when applied anyway, and the ones it places on the two-per-zone pool schedule, each
copy in the zone the plan charged for it.

Both zonal applies run in the order a loaded machine gave CI once (issue 26): LeaderWorkerSet
creates a group's workers only after its leader, so on a slow controller every leader is placed
before any worker. That order is made certain here (the workers held by a scheduling gate) and
made to bite (one zone cordoned while the leaders are placed): rendered without the zones the plan
charged, both leaders take the open zone, and each copy's workers, bound to their leader's zone,
find no room there, for good."""

from __future__ import annotations

import copy
import functools
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
from tests.sim.fleets import split_and_zonal_gang_fleet, zonal_gang_fleet
from tests.sim.stack import MERGE_PATCH, cordon, scheduler_said, unschedulable, wait_for

pytestmark = [pytest.mark.sim]

NS = "ml-team"
ZONE = "topology.kubernetes.io/zone"
GROUP = "leaderworkerset.sigs.k8s.io/group-index"
WORKER_INDEX = "leaderworkerset.sigs.k8s.io/worker-index"
REPLICA = "modelplane.ai/replica-index"
HOLD = "modelplane.ai/test-leaders-first"    # a scheduling gate of this test's, never rendered
WAIT_S = 120      # per condition: seconds on a quiet machine; 12x kube-scheduler's longest backoff (10 s)


def _pods(kube: KubeClient) -> list[dict[str, Any]]:
    return kube.items(f"/api/v1/namespaces/{NS}/pods")


def _node_zones(kube: KubeClient) -> dict[str, str]:
    return {n["metadata"]["name"]: n["metadata"]["labels"][ZONE] for n in kube.items("/api/v1/nodes")
            if ZONE in n["metadata"]["labels"]}


def _bound(kube: KubeClient, want: int) -> list[dict[str, Any]] | None:
    pods = [p for p in _pods(kube) if p["spec"].get("nodeName")]
    return pods if len(pods) == want else None


def _leaders_decided(kube: KubeClient, copies: int) -> list[dict[str, Any]] | None:
    """The `copies` leaders, once kube-scheduler has bound or refused every one."""
    leaders = [p for p in _pods(kube) if p["metadata"]["labels"].get(WORKER_INDEX) == "0"]
    decided = all(p["spec"].get("nodeName") or unschedulable(p) for p in leaders)
    return leaders if len(leaders) == copies and decided else None


def _release_and_count(kube: KubeClient, want: int) -> list[dict[str, Any]] | None:
    """Release every held worker (LWS may create a group's workers after this began), then the
    pods bound, once `want` are."""
    pods = _pods(kube)
    for pod in pods:
        if any(g.get("name") == HOLD for g in pod["spec"].get("schedulingGates") or []):
            resp = kube.http.patch(f"/api/v1/namespaces/{NS}/pods/{pod['metadata']['name']}",
                                   json={"spec": {"schedulingGates": None}}, headers=MERGE_PATCH)
            assert resp.status_code == 200, resp.text
    bound = [p for p in pods if p["spec"].get("nodeName")]
    return bound if len(bound) == want else None


def _apply_leaders_first(kube: KubeClient, objects: list[dict[str, Any]], closed_zone: str,
                         copies: int, want: int) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """Apply `objects` with every worker held (a scheduling gate on the LWS worker template) and
    the nodes of `closed_zone` cordoned, until each of the `copies` leaders is bound or refused;
    then open the zone, release the workers and wait for `want` pods bound. Returns the bound
    pods and where each leader was while the zone was closed ("refused": not bound)."""
    closed = [n for n, z in _node_zones(kube).items() if z == closed_zone]
    assert closed, f"no node in {closed_zone}"
    said = functools.partial(scheduler_said, kube, NS)
    cordon(kube, closed)
    for obj in copy.deepcopy(objects):
        if obj["kind"] == "LeaderWorkerSet":
            obj["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["schedulingGates"] = [{"name": HOLD}]
        kube.create(obj, exist_ok=True)
    leaders = wait_for(f"{copies} gang leaders, each bound or refused, {closed_zone} cordoned",
                       functools.partial(_leaders_decided, kube, copies), WAIT_S, explain=said)
    zones = _node_zones(kube)
    early = {p["metadata"]["name"]: zones[p["spec"]["nodeName"]] if p["spec"].get("nodeName") else "refused"
             for p in leaders}
    cordon(kube, closed, unschedulable=False)
    pods = wait_for(f"all {want} gang pods bound once {closed_zone} opened (leaders while it was closed: {early})",
                    functools.partial(_release_and_count, kube, want), WAIT_S, explain=said)
    return pods, early


@pytest.mark.timeout(900)
def test_each_copy_of_a_gang_runs_in_one_zone_on_the_real_scheduler(
        start_fleet: Callable[..., tuple[SimFleet, dict[str, Path]]], tmp_path: Path) -> None:
    """kube-scheduler v1.36 InterPodAffinity with the rendered terms: the copy's pod affinity
    (matchLabelKeys on the LWS group index, topologyKey zone) keeps a copy's worker with its
    leader, and the anti-affinity between copies (mismatchLabelKeys on it) keeps the second
    leader out of the first one's zone while the other zone is closed, so it waits for that zone
    instead of taking the room its own copy's worker, and the first copy's, need."""
    manifests = zonal_gang_fleet(tmp_path / "fleet")
    fleet = load_manifests(manifests)
    placement = place_fleet(fleet)
    [replica] = placement.by_key()[(NS, "gang")].replicas
    assert sorted(replica.engines["vllm"].zones) == ["us-east-1a", "us-east-1b"]
    objects = plan_fleet(fleet, placement).clusters["zonal"].objects()
    _, kubeconfigs = start_fleet(manifests)
    with KubeClient.from_kubeconfig(kubeconfigs["zonal"]) as kube:
        pods, early = _apply_leaders_first(kube, objects, "us-east-1b", 2, 4)
        zones = _node_zones(kube)
    assert sorted(early.values()) == ["refused", "us-east-1a"], early
    by_copy: dict[str, set[str]] = defaultdict(set)
    for pod in pods:
        by_copy[pod["metadata"]["labels"][GROUP]].add(zones[pod["spec"]["nodeName"]])
    assert len(by_copy) == 2 and all(len(z) == 1 for z in by_copy.values()), dict(by_copy)
    assert sorted(z for zs in by_copy.values() for z in zs) == ["us-east-1a", "us-east-1b"], dict(by_copy)


@pytest.mark.timeout(900)
def test_plan_and_cluster_agree_on_gang_zones(
        start_fleet: Callable[..., tuple[SimFleet, dict[str, Path]]], tmp_path: Path) -> None:
    """The plan places two copies on `zonal` (one per zone) and refuses `split` with
    ZoneShortfall; on the real clusters those two schedule, each in the zone the plan charged
    for it (its node affinity), even when the leaders are placed first with a zone closed; and
    the objects of a placement on `split` (as a plan that believed its pool in one zone would
    make them) leave the worker Pending: kube-scheduler finds no node in the leader's zone."""
    manifests = split_and_zonal_gang_fleet(tmp_path / "fleet", ["us-east-1a", "us-east-1b"])
    fleet = load_manifests(manifests)
    placement = place_fleet(fleet)
    placed = placement.by_key()[(NS, "gang")]
    assert sorted(r.cluster for r in placed.replicas) == ["zonal", "zonal"]
    assert sorted(r.engines["vllm"].zones for r in placed.replicas) == [("us-east-1a",), ("us-east-1b",)]
    planned = {str(r.index): r.engines["vllm"].zones[0] for r in placed.replicas}
    refusal = placed.unplaced[0].reasons["split"]
    assert refusal.code == ZONE_SHORTFALL and "us-east-1a: 8 of 8, us-east-1b: 8 of 8" in refusal.message, refusal
    zonal_objects = plan_fleet(fleet, placement).clusters["zonal"].objects()
    # what a zone-blind plan would put on `split`: the same fleet with its pool in one zone
    believed = load_manifests(split_and_zonal_gang_fleet(tmp_path / "believed", ["us-east-1a"]))
    blind = place_fleet(believed)
    assert any(r.cluster == "split" for r in blind.by_key()[(NS, "gang")].replicas)
    split_objects = plan_fleet(believed, blind).clusters["split"].objects()
    _, kubeconfigs = start_fleet(manifests)
    with KubeClient.from_kubeconfig(kubeconfigs["zonal"]) as kube:
        pods, early = _apply_leaders_first(kube, zonal_objects, "us-east-1b", 2, 4)
        zones = _node_zones(kube)
    assert sorted(early.values()) == ["refused", "us-east-1a"], early
    # two replicas, so two LeaderWorkerSets, each with its copy 0
    per_copy: dict[tuple[str, str], set[str]] = defaultdict(set)
    for pod in pods:
        labels = pod["metadata"]["labels"]
        per_copy[(labels[REPLICA], labels[GROUP])].add(zones[pod["spec"]["nodeName"]])
    assert per_copy == {(index, "0"): {zone} for index, zone in planned.items()}, (dict(per_copy), planned)
    with KubeClient.from_kubeconfig(kubeconfigs["split"]) as kube:
        split_zones = sorted(set(_node_zones(kube).values()))
        nodes = len(kube.items("/api/v1/nodes"))
        for obj in split_objects:
            kube.create(obj, exist_ok=True)

        def one_bound_one_refused() -> tuple[list[dict[str, Any]], list[dict[str, Any]]] | None:
            pods = _pods(kube)
            running = [p for p in pods if p["spec"].get("nodeName")]
            stuck = [p for p in pods if unschedulable(p)]
            return (running, stuck) if running and stuck else None

        running, stuck = wait_for("one pod of the split copy bound and the other refused",
                                  one_bound_one_refused, WAIT_S, explain=functools.partial(scheduler_said, kube, NS))
    assert split_zones == ["us-east-1a", "us-east-1b"], split_zones
    assert len(running) == 1, [p["metadata"]["name"] for p in running]
    why = next(c["message"] for c in stuck[0]["status"]["conditions"] if c.get("type") == "PodScheduled")
    # the scheduler's verdict over every node of the cluster (nothing left to wait for), and why
    assert why.startswith(f"0/{nodes} nodes are available") and "affinity" in why, why
