"""Verification (modelplane.observe.verify): each placed replica against its cluster's objects."""

from __future__ import annotations

from typing import Any

import pytest

from modelplane.api import load_manifest_text
from modelplane.naming import claim_template_name
from modelplane.observe.read import NotRead, Unreachable
from modelplane.observe.verify import NOT_READY, READY, UNKNOWN, verify
from modelplane.scheduler import FleetPlacement, place_fleet
from tests import manifests as g

from .objects import claim, cluster_objects, our_pod, reading, slice_devices

SCHEDULER_SAYS = ("0/1 nodes are available: 1 cannot allocate all claims. preemption: 0/1 nodes are available: "
                  "1 Preemption is not helpful for scheduling.")


def setup(copies: int = 1) -> tuple[Any, FleetPlacement, Any]:
    cls = g.inference_class("h100x8", g.device("gpu", 8, "81559Mi"))
    docs = [cls, g.cluster("a", g.pool("gpu", "h100x8", 1), g.pool("other", "h100x8", 1)),
            g.deployment("chat", 1, g.engine("main", g.standalone(2), copies=copies))]
    fl = load_manifest_text(g.to_yaml(docs))
    return fl, place_fleet(fl), cluster_objects(fl, "a")


def running(fl: Any, placement: FleetPlacement, objs: Any, *, node_index: int = 0, devices: int = 2,
            **pod: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """One pod of the replica (and its claim), as the cluster runs it."""
    nodes, slices = objs
    rep = placement.deployments[0].replicas[0]
    template = claim_template_name(rep.name, "main", "Standalone")
    node = nodes[node_index]["metadata"]["name"]
    p = our_pod("default", f"{rep.name}-pod", "chat", "a", rep.index, node=node, template=template,
                claim_name=f"{rep.name}-claim", **pod)
    c = claim("default", f"{rep.name}-claim", slice_devices(slices, node)[:devices], owner_pod=p["metadata"]["name"])
    return [p], [c]


def check(fl: Any, placement: FleetPlacement, objs: Any, pods: list[Any], claims: list[Any]) -> Any:
    nodes, slices = objs
    (result,) = verify(fl, placement, {"a": reading("a", nodes, slices, claims, pods)}).replicas
    return result


def test_a_replica_running_ready_where_planned_with_its_devices_verifies() -> None:
    fl, placement, objs = setup()
    pods, claims = running(fl, placement, objs)
    result = check(fl, placement, objs, pods, claims)
    assert (result.status, result.pods, result.expected, result.problems) == (READY, 1, 1, ())


@pytest.mark.parametrize(("case", "pod", "devices", "node_index", "problem"), [
    ("pending with the scheduler's reason", {"phase": "Pending", "scheduled_message": SCHEDULER_SAYS}, 0, 0,
     "Pending, not scheduled: " + SCHEDULER_SAYS),
    ("running but not ready", {"ready": False}, 2, 0, "Running, not Ready: readiness probe failing"),
    ("on a node of another pool", {}, 2, 1, "runs on node a-worker2 of pool other, the plan chose gpu"),
    ("a claim with fewer devices than charged", {}, 1, 0, "its ResourceClaim holds 1 device(s), the plan charged 2"),
])
def test_why_a_replica_does_not_verify(case: str, pod: dict[str, Any], devices: int, node_index: int,
                                       problem: str) -> None:
    fl, placement, objs = setup()
    pods, claims = running(fl, placement, objs, node_index=node_index, devices=devices, **pod)
    result = check(fl, placement, objs, pods, claims)
    assert result.status == NOT_READY, case
    assert result.problems == (f"pod {pods[0]['metadata']['name']}: {problem}",)


def test_missing_pods_and_claims_are_named() -> None:
    fl, placement, objs = setup(copies=2)
    pods, _ = running(fl, placement, objs)
    result = check(fl, placement, objs, pods, [])
    assert result.status == NOT_READY
    assert result.problems == ("engine main member 0: 1 of 2 pod(s) exist",
                               f"pod {pods[0]['metadata']['name']}: its ResourceClaim does not exist")


@pytest.mark.parametrize(("found", "problem"), [
    (None, "cluster not observed (no kubeconfig)"),
    (Unreachable("a", "no answer within 5s"), "cluster unreachable: no answer within 5s"),
    (NotRead("a", "kubeconfig unusable: x"), "cluster not observed: kubeconfig unusable: x"),
])
def test_a_replica_on_a_cluster_not_read_is_not_a_success(found: Any, problem: str) -> None:
    fl, placement, _ = setup()
    report = verify(fl, placement, {} if found is None else {"a": found})
    assert not report.ok
    assert [(r.status, r.problems) for r in report.replicas] == [(UNKNOWN, (problem,))]


def test_pods_of_replicas_the_placement_does_not_have_are_strays() -> None:
    fl, placement, objs = setup()
    nodes, slices = objs
    stray = our_pod("default", "old", "chat", "a", 9, node=nodes[0]["metadata"]["name"])
    pods, claims = running(fl, placement, objs)
    report = verify(fl, placement, {"a": reading("a", nodes, slices, claims, [*pods, stray])})
    assert report.ok and report.strays == ("default/chat a#9 (1 pod(s))",)
