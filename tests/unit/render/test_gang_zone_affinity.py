"""Contract tests: a gang copy runs in the zone the plan charged for it (issue 26 item 1, the
gang-zone flake). The render keeps each copy's pods in one zone (pod affinity, KEP-3633
matchLabelKeys), the copies in the zones the plan charged (node affinity on
topology.kubernetes.io/zone), and, when every copy has a zone of its own, copies out of each
other's zones (pod anti-affinity, KEP-3633 mismatchLabelKeys)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from modelplane.api import load_manifests
from modelplane.plan import plan_fleet
from modelplane.render import render_replica
from modelplane.scheduler import place_fleet
from tests.sim.fleets import zonal_gang_fleet

from .cloudfleet import cloud_fleet, gang
from .fleets import by_kind, full_fleet, one, place
from .schema import validate_any

ZONE = "topology.kubernetes.io/zone"
LWS_GROUP = "leaderworkerset.sigs.k8s.io/group-index"
GROVE_GROUP = "grove.io/podcliquescalinggroup-replica-index"
WORKLOAD = "modelplane.ai/workload"
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"


def _zones_in(spec: dict[str, Any]) -> list[str] | None:
    """The zones a pod spec's required node affinity allows, None without one."""
    node = spec.get("affinity", {}).get("nodeAffinity")
    if node is None:
        return None
    [term] = node[REQUIRED]["nodeSelectorTerms"]
    [expression] = term["matchExpressions"]
    assert (expression["key"], expression["operator"]) == (ZONE, "In"), expression
    return list(expression["values"])


def _apart(spec: dict[str, Any]) -> list[dict[str, Any]]:
    """The required pod anti-affinity terms of a pod spec."""
    return list(spec.get("affinity", {}).get("podAntiAffinity", {}).get(REQUIRED, []))


def _together(spec: dict[str, Any]) -> list[dict[str, Any]]:
    return list(spec.get("affinity", {}).get("podAffinity", {}).get(REQUIRED, []))


def _lws_specs(objects: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    lws = one(objects, "LeaderWorkerSet")
    validate_any(lws)
    template = lws["spec"]["leaderWorkerTemplate"]
    return lws["metadata"]["name"], [template["leaderTemplate"]["spec"], template["workerTemplate"]["spec"]]


@dataclass(frozen=True)
class Case:
    name: str
    copies: int
    planned: tuple[str, ...]           # EnginePlacement.zones: the zone of copy c at c
    zones_in: list[str] | None         # the node affinity's zones (None: no node affinity)
    apart: bool                        # a required anti-affinity keeps copies out of each other's zones


CASES = [
    Case("two copies in two zones: each its own, never sharing", 2, ("us-east-1b", "us-east-1a"),
         ["us-east-1a", "us-east-1b"], True),
    Case("one copy: pinned to its zone", 1, ("us-east-1b",), ["us-east-1b"], False),
    Case("two copies in one zone: pinned there, nothing to keep apart", 2, ("us-east-1a", "us-east-1a"),
         ["us-east-1a"], False),
    # the mixed case: two copies share a zone and one has its own; no anti-affinity term says
    # "at most two here", so only the zone set is pinned (modelplane.clouds.nodes.gang_zone_affinity)
    Case("three copies over two zones: the zone set only", 3, ("us-east-1a", "us-east-1a", "us-east-1b"),
         ["us-east-1a", "us-east-1b"], False),
    Case("three copies in three zones: each its own", 3, ("us-east-1a", "us-east-1b", "us-east-1c"),
         ["us-east-1a", "us-east-1b", "us-east-1c"], True),
    # a placement read from JSON written before zones were recorded, or a pool in one zone
    Case("no zones recorded: the copy affinity only", 2, (), None, False),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_a_gang_copy_runs_in_the_zone_the_plan_charged_for_it(case: Case) -> None:
    """KEP-3633 (https://www.kubernetes.dev/resources/keps/3633/, alpha 1.29, beta 1.31, stable
    1.33; kubernetes/api core/v1 types.go PodAffinityTerm): the API server merges the new pod's
    own value of each `matchLabelKeys` key into the term's selector as `key in (value)`, and of
    each `mismatchLabelKeys` key as `key notin (value)`, at pod creation. LeaderWorkerSet labels
    every pod of a group with its `leaderworkerset.sigs.k8s.io/group-index` (kubernetes-sigs/lws
    api/leaderworkerset/v1 GroupIndexLabelKey), and creates a group's workers only after its
    leader, so the copies' leaders choose the zones. The plan charged each copy a zone
    (EnginePlacement.zones, modelplane.scheduler.plugins.gang_zones): a required node affinity
    `topology.kubernetes.io/zone In <those zones>` keeps the copies there, and where every copy
    has a zone of its own, a required anti-affinity against the other groups' pods (the group
    index `notin` the pod's own, topologyKey zone) stops two leaders taking one zone, whose
    workers would then both need it (the gang-zone flake)."""
    fl = cloud_fleet(gang("copies", copies=case.copies))
    placed = place(fl, "ml-team", "copies", "eks-a", pools={"vllm": ("efa", "efa")})
    placed = replace(placed, engines={"vllm": replace(placed.engines["vllm"], zones=case.planned)})
    name, specs = _lws_specs(render_replica(fl, fl.deployments[("ml-team", "copies")], placed, "eks-a"))
    for spec in specs:
        assert _zones_in(spec) == case.zones_in
        # the copy's own pods stay together, whatever else is pinned
        assert _together(spec) == [{"labelSelector": {"matchLabels": {WORKLOAD: name}},
                                    "matchLabelKeys": [LWS_GROUP], "topologyKey": ZONE}]
        want = [{"labelSelector": {"matchLabels": {WORKLOAD: name}}, "mismatchLabelKeys": [LWS_GROUP],
                 "topologyKey": ZONE}] if case.apart else []
        assert _apart(spec) == want


def test_a_grove_gang_copy_is_kept_apart_by_its_scaling_group_replica_index() -> None:
    """ai-dynamo/grove operator/api/common/labels.go: every pod of a PodCliqueScalingGroup replica
    carries `grove.io/podcliquescalinggroup-replica-index`, the Grove copy's index; KEP-3633
    merges mismatchLabelKeys at pod creation, before any scheduler (KAI's too) reads the pod."""
    fl = full_fleet()
    placed = place(fl, "research", "big", "dynamo-b", pools={"tp16": ("small", "h100")})
    engine = placed.engines["tp16"]
    placed = replace(placed, engines={"tp16": replace(engine, zones=("zone-b", "zone-a"))})
    dep = fl.deployments[("research", "big")]
    assert next(e for e in dep.spec.template.spec.engines if e.name == "tp16").copies == 2
    pcs = one(render_replica(fl, dep, placed, "dynamo-b"), "PodCliqueSet")
    validate_any(pcs)
    for clique in pcs["spec"]["template"]["cliques"]:
        spec = clique["spec"]["podSpec"]
        assert _zones_in(spec) == ["zone-a", "zone-b"]
        assert _apart(spec) == [{"labelSelector": {"matchLabels": {WORKLOAD: pcs["metadata"]["name"]}},
                                 "mismatchLabelKeys": [GROVE_GROUP], "topologyKey": ZONE}]


@dataclass(frozen=True)
class Real:
    name: str
    nodes: int        # p5 nodes of the pool, half in us-east-1a, half in us-east-1b
    copies: int
    replicas: int
    workers: int


REAL = [
    Real("two copies, two nodes a zone: one copy a zone", 4, 2, 1, 1),
    Real("three replicas of one copy, two nodes a zone: two replicas placed, one a zone", 4, 1, 3, 1),
    Real("two copies, four nodes a zone: both in one zone", 8, 2, 1, 1),
    Real("three copies, four nodes a zone: two share a zone", 8, 3, 1, 1),
    Real("two copies of three pods, three nodes a zone", 6, 2, 1, 2),
]


@pytest.mark.parametrize("case", REAL, ids=[c.name for c in REAL])
def test_the_zones_a_real_placement_charged_are_the_rendered_ones(case: Real, tmp_path: Path) -> None:
    """The fleet scheduler's gang-zones plugin charges each copy a zone and records it
    (EnginePlacement.zones); plan_fleet renders from the same placement, so every
    LeaderWorkerSet pins exactly the zones its replica's copies were charged, and keeps copies
    apart exactly when each has a zone of its own."""
    fleet = load_manifests(zonal_gang_fleet(tmp_path, case.nodes, case.copies, case.replicas, case.workers))
    placement = place_fleet(fleet)
    placed = placement.by_key()[("ml-team", "gang")]
    assert placed.replicas, placed.unplaced
    objects = plan_fleet(fleet, placement).clusters["zonal"].objects()
    workloads = {o["metadata"]["name"]: o for o in by_kind(objects, "LeaderWorkerSet")}
    assert len(workloads) == len(placed.replicas)
    for replica in placed.replicas:
        zones = replica.engines["vllm"].zones
        assert len(zones) == case.copies and set(zones) <= {"us-east-1a", "us-east-1b"}, zones
        [lws] = [o for o in workloads.values()
                 if o["metadata"]["labels"].get("modelplane.ai/replica-index") == str(replica.index)]
        _, specs = _lws_specs([lws])
        for spec in specs:
            assert _zones_in(spec) == sorted(set(zones)), (replica.name, zones)
            assert bool(_apart(spec)) == (case.copies > 1 and len(set(zones)) == case.copies), (replica.name, zones)
