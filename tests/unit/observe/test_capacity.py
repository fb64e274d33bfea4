"""Observed capacity (modelplane.observe.capacity): what each pool really has free, fed to the
scheduler's ledger per node. Table tests over objects shaped as the API returns them."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from modelplane.api import load_manifest_text
from modelplane.observe.capacity import DECLARED, OBSERVED, FleetCapacity, fleet_capacity
from modelplane.observe.read import NotRead, Unreachable
from modelplane.scheduler import place_fleet
from tests import manifests as g

from .objects import claim, cluster_objects, our_pod, reading, slice_devices

H100 = "device.capacity[\"gpu.nvidia.com\"].memory.compareTo(quantity(\"40Gi\")) >= 0"


def fleet(nodes: int = 1, replicas: int = 2, gpus: int = 4, source: str = "Kind", extra: list[dict] | None = None):
    cls = g.inference_class("h100x8", g.device("gpu", 8, "81559Mi"))
    cl = g.cluster("a", g.pool("gpu", "h100x8", nodes))
    cl["spec"]["cluster"] = {"source": source, **({"existing": {}} if source == "Existing" else {})}
    dep = g.deployment("chat", replicas, g.engine("main", g.standalone(gpus)))
    return load_manifest_text(g.to_yaml([cls, cl, dep, *(extra or [])]))


def capacity_of(fl, **lists: Any) -> FleetCapacity:
    nodes, slices = cluster_objects(fl, "a")
    return fleet_capacity(fl, {"a": reading("a", lists.get("nodes", nodes), slices, lists.get("claims", []),
                                            lists.get("pods", []))}, lists.get("previous"))


def test_a_foreign_claim_on_4_of_8_devices_leaves_4_and_the_plan_places_on_them() -> None:
    """8 declared GPUs, 4 held by another tenant's claim: one 4-GPU replica fits, not two, and
    the capacity says where the other 4 went."""
    fl = fleet()
    nodes, slices = cluster_objects(fl, "a")
    held = claim("other-team", "their-claim", slice_devices(slices, nodes[0]["metadata"]["name"])[:4])
    cap = fleet_capacity(fl, {"a": reading("a", nodes, slices, [held])})
    pool = cap.clusters["a"].pools["gpu"]
    assert (pool.source, pool.free, pool.devices, pool.held) == (OBSERVED, ((4,),), 8, 4)
    declared = place_fleet(fl).find("default", "chat")
    observed = place_fleet(fl, observed=cap.observed()).find("default", "chat")
    assert declared is not None and observed is not None
    assert len(declared.replicas) == 2 and len(observed.replicas) == 1
    assert observed.unplaced[0].reasons["a"].message == "engine main: short by 4 devices in pool gpu"


def test_our_kept_replicas_devices_are_charged_by_the_ledger_not_twice() -> None:
    """A replica of the previous placement holds 4 devices: they count as free in the
    observation because the ledger charges the kept replica itself; the other 4 take a new one."""
    prev = g.previous_from(place_fleet(fleet(replicas=1)))      # one replica placed before
    fl2 = fleet(replicas=2)
    (rep,) = prev.deployments[0].replicas
    nodes, slices = cluster_objects(fl2, "a")
    node = nodes[0]["metadata"]["name"]
    pod = our_pod("default", "chat-pod", "chat", "a", rep.index, node=node, template="t", claim_name="c")
    ours = claim("default", "c", slice_devices(slices, node)[:4], owner_pod="chat-pod")
    cap = fleet_capacity(fl2, {"a": reading("a", nodes, slices, [ours], [pod])}, prev)
    assert cap.clusters["a"].pools["gpu"].free == ((8,),)
    placed = place_fleet(fl2, prev, observed=cap.observed()).find("default", "chat")
    assert placed is not None and len(placed.replicas) == 2 and not placed.unplaced
    # counted twice (held and charged), the second replica would not fit
    held = fleet_capacity(fl2, {"a": reading("a", nodes, slices, [ours], [pod])}, None)
    again = place_fleet(fl2, prev, observed=held.observed()).find("default", "chat")
    assert again is not None and len(again.replicas) == 1


def test_pods_of_ours_outside_the_previous_placement_hold_their_devices_and_are_named() -> None:
    fl = fleet()
    nodes, slices = cluster_objects(fl, "a")
    node = nodes[0]["metadata"]["name"]
    pod = our_pod("default", "old-pod", "chat", "a", 7, node=node, template="t", claim_name="c")
    stray = claim("default", "c", slice_devices(slices, node)[:2], owner_pod="old-pod")
    pool = fleet_capacity(fl, {"a": reading("a", nodes, slices, [stray], [pod])}).clusters["a"].pools["gpu"]
    assert (pool.free, pool.held, pool.strays) == (((6,),), 2, 2)
    assert pool.to_json()["heldByStrays"] == 2


def _node(nodes: list[dict[str, Any]], i: int) -> dict[str, Any]:
    return nodes[i]


@pytest.mark.parametrize(("case", "change", "free", "note"), [
    ("cordoned", lambda n: n["spec"].update(unschedulable=True), ((8,),), "cordoned: nothing new lands there"),
    ("NotReady", lambda n: n["status"].update(conditions=[{"type": "Ready", "status": "False"}]), ((8,),),
     "NotReady: its devices leave the ledger"),
    ("no Ready condition", lambda n: n["status"].update(conditions=[]), ((8,),), "no Ready condition"),
    ("NoExecute taint", lambda n: n["spec"].update(taints=[{"key": "maint", "effect": "NoExecute"}]), ((8,),),
     "untolerated taint maint:NoExecute: its devices leave the ledger"),
    ("NoSchedule taint", lambda n: n["spec"].update(taints=[{"key": "maint", "effect": "NoSchedule"}]), ((8,),),
     "untolerated taint maint:NoSchedule: nothing new lands there"),
    ("the GPU taint our pods tolerate", lambda n: n["spec"].update(
        taints=[{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]), ((8,), (8,)), None),
    ("PreferNoSchedule", lambda n: n["spec"].update(taints=[{"key": "x", "effect": "PreferNoSchedule"}]),
     ((8,), (8,)), None),
])
def test_a_node_that_takes_no_new_pods_leaves_the_ledger(case: str, change: Any, free: Any, note: str | None) -> None:
    fl = fleet(nodes=2)
    nodes, slices = cluster_objects(fl, "a")
    change(nodes[0])
    cap = fleet_capacity(fl, {"a": reading("a", nodes, slices)}).clusters["a"]
    assert cap.pools["gpu"].free == free, case
    if note:
        assert any(note in n and nodes[0]["metadata"]["name"] in n for n in cap.notes), cap.notes
    else:
        assert not cap.notes


def test_a_removed_node_leaves_the_ledger_even_if_its_slice_stays() -> None:
    fl = fleet(nodes=2)
    nodes, slices = cluster_objects(fl, "a")
    pool = fleet_capacity(fl, {"a": reading("a", nodes[1:], slices)}).clusters["a"].pools["gpu"]
    assert (pool.free, pool.devices) == (((8,),), 8)


def test_a_cordoned_node_keeps_only_what_our_kept_replicas_hold_there() -> None:
    """Cordoning does not evict: the replica running there stays countable on it, nothing new lands."""
    fl = fleet(nodes=2, replicas=1)
    prev = g.previous_from(place_fleet(fl))
    rep = prev.deployments[0].replicas[0]
    nodes, slices = cluster_objects(fl, "a")
    node = nodes[0]["metadata"]["name"]
    nodes[0]["spec"]["unschedulable"] = True
    pod = our_pod("default", "p", "chat", "a", rep.index, node=node, template="t", claim_name="c")
    ours = claim("default", "c", slice_devices(slices, node)[:4], owner_pod="p")
    cap = fleet_capacity(fl, {"a": reading("a", nodes, slices, [ours], [pod])}, prev).clusters["a"]
    assert cap.pools["gpu"].free == ((4,), (8,))
    assert any("only the replicas already there count" in n for n in cap.notes)


@pytest.mark.parametrize(("source", "expected"), [
    ("Kind", {"source": DECLARED,
              "reason": "no node labelled modelplane.ai/pool=gpu yet (the pool may not exist yet)"}),
    ("Existing", {"source": OBSERVED, "nodes": 0, "devices": 0, "held": 0, "free": []}),
])
def test_a_pool_without_nodes(source: str, expected: dict[str, Any]) -> None:
    """On sources whose pools the program creates, a pool nobody sees yet keeps its declared size;
    on an Existing cluster nobody labelled its nodes (silent failure 6): it holds nothing."""
    fl = fleet(source=source)
    cap = fleet_capacity(fl, {"a": reading("a", [], [])})
    assert cap.clusters["a"].pools["gpu"].to_json() == expected


@pytest.mark.parametrize(("found", "reason"), [
    (None, "not observed (no kubeconfig)"),
    (Unreachable("a", "the API server at https://127.0.0.1:1 did not answer"),
     "unreachable: the API server at https://127.0.0.1:1 did not answer"),
    (NotRead("a", "kubeconfig unusable: cannot read kubeconfig x"),
     "not observed (kubeconfig unusable: cannot read kubeconfig x)"),
])
def test_a_cluster_not_read_keeps_its_declared_sizes_and_says_why(found: Any, reason: str) -> None:
    fl = fleet()
    cap = fleet_capacity(fl, {} if found is None else {"a": found})
    assert cap.to_json() == {"a": {"source": DECLARED, "reason": reason}}
    assert cap.observed() == {}


def test_the_newest_slice_generation_counts() -> None:
    fl = fleet()
    nodes, slices = cluster_objects(fl, "a")
    stale = json.loads(json.dumps(slices[0]))
    stale["metadata"]["name"] += "-old"
    stale["spec"]["pool"]["generation"] = 0
    stale["spec"]["devices"] = [{"name": f"old-{i}"} for i in range(3)]
    pool = fleet_capacity(fl, {"a": reading("a", nodes, [stale, *slices])}).clusters["a"].pools["gpu"]
    assert (pool.free, pool.devices) == (((8,),), 8)


def test_device_kinds_of_one_driver_share_its_devices_in_class_order_and_synthetic_ones_count_as_declared() -> None:
    cls = g.inference_class("mixed", g.device("big", 2, "80Gi"), g.device("small", 4, "20Gi"),
                            g.device("nic", 4, claim="Synthetic", driver="efa"))
    cl = g.cluster("a", g.pool("gpu", "mixed", 1))
    fl = load_manifest_text(g.to_yaml([cls, cl]))
    nodes, slices = cluster_objects(fl, "a")
    node = nodes[0]["metadata"]["name"]
    held = claim("x", "c", slice_devices(slices, node)[:3])
    pool = fleet_capacity(fl, {"a": reading("a", nodes, slices, [held])}).clusters["a"].pools["gpu"]
    assert pool.free == ((2, 1, 4),)        # 6 published, 3 held: big takes 2, small what is left


def test_the_same_objects_in_any_order_give_the_same_value_and_json_round_trips() -> None:
    fl = fleet(nodes=3)
    nodes, slices = cluster_objects(fl, "a")
    nodes[1]["spec"]["unschedulable"] = True
    held = claim("t", "c", slice_devices(slices, nodes[2]["metadata"]["name"])[:5])
    one = fleet_capacity(fl, {"a": reading("a", nodes, slices, [held])})
    rng = random.Random(7)
    for _ in range(5):
        rng.shuffle(nodes)
        rng.shuffle(slices)
        assert fleet_capacity(fl, {"a": reading("a", nodes, slices, [held])}).to_json() == one.to_json()
    assert FleetCapacity.from_json(json.loads(json.dumps(one.to_json()))) == one


def test_node_accounting_counts_only_wholly_free_nodes() -> None:
    fl = fleet(nodes=2, replicas=3, gpus=8)
    nodes, slices = cluster_objects(fl, "a")
    held = claim("t", "c", slice_devices(slices, nodes[0]["metadata"]["name"])[:1])
    cap = fleet_capacity(fl, {"a": reading("a", nodes, slices, [held])})
    dep = place_fleet(fl, accounting="Node", observed=cap.observed()).find("default", "chat")
    assert dep is not None and len(dep.replicas) == 1


def test_node_counts_for_the_declared_capacity_check() -> None:
    """The policy pack compares declared pool sizes with what was observed (silent failure 7)."""
    from modelplane.checks import run_checks

    fl = fleet(nodes=3)
    nodes, slices = cluster_objects(fl, "a")
    cap = fleet_capacity(fl, {"a": reading("a", nodes[:2], slices)})
    assert cap.node_counts() == {"a": {"gpu": 2}}
    findings = [f for f in run_checks(fl, observed=cap.node_counts()) if f.policy == "declared-capacity"]
    assert len(findings) == 1 and "declares nodeCount 3 but the cluster reports 2 node(s)" in findings[0].message
