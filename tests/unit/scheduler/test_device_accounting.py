"""Device accounting (the default; reference issue #172): charge devices, not nodes."""

import pytest

from modelplane.scheduler.ledger import DevicePool, NodePool

from .helpers import (
    Case,
    check,
    cluster,
    deployment,
    engine,
    gang,
    gpu_class,
    of,
    plan,
    pool,
    prev,
    standalone,
    where,
)

H8 = gpu_class("h100x8", 8, "81559Mi")


def one_node(nodes: int = 1) -> list[dict]:
    return [H8, cluster("a", pool("p1", "h100x8", nodes))]


CASES = [
    Case("eight 1-GPU replicas share one 8-GPU node (Device)",
         [*one_node(), deployment("m", 9)], {"m": [f"a#{i}" for i in range(8)]},
         accounting="Device", reasons={"m": "PartialCapacity"}),
    Case("Node accounting keeps the reference: one replica per node",
         [*one_node(), deployment("m", 9)], {"m": ["a#0"]}, accounting="Node",
         reasons={"m": "PartialCapacity"}),
    Case("best-fit keeps a whole node free for a full-node pod",
         # 6 GPUs, then 2 GPUs go on the same node (fewest free devices that fit), so
         # the 8-GPU pod still finds an empty node. First-fit on node order would not.
         [*one_node(2), deployment("a-six", 1, engine("main", standalone(gpus=6))),
          deployment("b-two", 1, engine("main", standalone(gpus=2))),
          deployment("c-eight", 1, engine("main", standalone(gpus=8)))],
         {"a-six": ["a#0"], "b-two": ["a#0"], "c-eight": ["a#0"]}, accounting="Device"),
    Case("all devices of one pod come from one node",
         # 16 free GPUs over two nodes, but a third 5-GPU pod fits on neither node.
         [*one_node(2), deployment("m", 1, engine("main", standalone(gpus=5), copies=3))],
         {"m": []}, accounting="Device", reasons={"m": "InsufficientCapacity"}),
    Case("two 5-GPU copies fit on two nodes",
         [*one_node(2), deployment("m", 1, engine("main", standalone(gpus=5), copies=2))],
         {"m": ["a#0"]}, accounting="Device"),
    Case("gang pods each take their devices from one node",
         # Leader 4 + Worker 2x4: three 4-GPU pods on two 8-GPU nodes.
         [*one_node(2), deployment("m", 2, gang(leader_gpus=4, worker_nodes=2, worker_gpus=4))],
         {"m": ["a#0"]}, accounting="Device", reasons={"m": "PartialCapacity"}),
    Case("claimless pods cost nothing in Device mode",
         [*one_node(1), deployment("m", 2, gang(leader_gpus=None, worker_nodes=2, worker_gpus=4))],
         {"m": ["a#0"]}, accounting="Device"),
    Case("retained sub-node replicas are packed before new ones",
         [*one_node(1), deployment("m", 3, engine("main", standalone(gpus=4)))],
         {"m": ["a#0", "a#1"]}, accounting="Device",
         previous=prev(("m", "a", 0, {"main": "p1"}))),
    Case("observed node count overrides the declared one",
         [gpu_class("h100", 1), cluster("a", pool("p1", "h100", 1)), deployment("m", 3)],
         {"m": ["a#0", "a#1", "a#2"]}, accounting="Device", observed={"a": {"p1": 3}}),
    Case("observed capacity of 0 hosts nothing",
         [gpu_class("h100", 1), cluster("a", pool("p1", "h100", 4)), deployment("m", 1)],
         {"m": []}, accounting="Node", observed={"a": {"p1": 0}}),
    Case("maxNodeCount is the declared capacity when set",
         [gpu_class("h100", 1), cluster("a", pool("p1", "h100", 1, max_nodes=2)), deployment("m", 3)],
         {"m": ["a#0", "a#1"]}, accounting="Node"),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_device_accounting(case: Case) -> None:
    check(case)


def test_retained_overcommit_keeps_only_what_fits() -> None:
    # Two retained 8-GPU replicas on a one-node pool: the one that does not fit is not
    # kept (issue 9 item 5; docs/scheduler.md "Overdrawn pools"), and nothing new lands.
    fp = plan([*one_node(1), deployment("a-big", 2, engine("main", standalone(gpus=8))),
               deployment("b-small", 1)],
              previous=prev(("a-big", "a", 0, {"main": "p1"}), ("a-big", "a", 1, {"main": "p1"})),
              accounting="Device")
    assert where(fp, "a-big") == ["a#0"]
    assert [c.type for c in of(fp, "a-big").conditions] == ["ReplicasScheduled", "Overdrawn"]
    assert where(fp, "b-small") == []
    assert "short by 1 device in pool p1" in of(fp, "b-small").unplaced[0].reasons["a"].message


def test_device_pool_best_fit_and_rollback() -> None:
    p = DevicePool.full((8,), 2)
    assert p.try_take([(1, (6,))]) == 0
    assert p.try_take([(1, (2,))]) == 0
    assert p.groups == {(0,): 1, (8,): 1}
    # a failing request charges nothing and reports the devices it lacked
    assert p.try_take([(2, (8,))]) == 8
    assert p.groups == {(0,): 1, (8,): 1}


def test_node_pool_reports_missing_nodes() -> None:
    p = NodePool(2)
    assert p.try_take([(3, ())]) == 1
    assert p.free == 2
    p.force_take([(3, ())])
    assert p.free == -1 and p.try_take([(1, ())]) == 2


def test_kept_pods_are_repacked_largest_first_when_their_order_does_not_fit() -> None:
    # 3,3 then 5,5 GPUs on two 8-GPU nodes: best-fit in that order strands a 5-GPU pod,
    # largest first packs all four (5+3 per node). The kept replicas must not leave the
    # pool overdrawn.
    from modelplane.scheduler import place_fleet_with_ledger

    from .helpers import load
    docs = [*one_node(2), deployment("a", 2, engine("main", standalone(gpus=3))),
            deployment("b", 2, engine("main", standalone(gpus=5)))]
    previous = prev(("a", "a", 0, {"main": "p1"}), ("a", "a", 1, {"main": "p1"}),
                    ("b", "a", 0, {"main": "p1"}), ("b", "a", 1, {"main": "p1"}))
    fp, ledger = place_fleet_with_ledger(load(docs), previous=previous, accounting="Device")
    assert where(fp, "a") == ["a#0", "a#1"] and where(fp, "b") == ["a#0", "a#1"]
    state = ledger.state(("a", "p1"))
    assert state.overdraft == 0 and state.groups == {(0,): 2}
