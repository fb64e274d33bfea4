"""Cluster-level placement rules: mirrors the reference's TestSchedule table (semantics
§8.1), Node accounting unless stated. Readiness cases (not-ready / no-address clusters,
degraded pinned cluster) have no counterpart: every declared cluster is created by the
program and is Ready with a gateway."""

import pytest

from .helpers import (
    H100,
    Case,
    check,
    cluster,
    deployment,
    engine,
    gang,
    pool,
    prev,
    standalone,
)

A1 = cluster("a", pool("p1", "h100", 1))
B1 = cluster("b", pool("p1", "h100", 1))


def two(a_nodes: int, b_nodes: int) -> list[dict]:
    return [H100, cluster("a", pool("p1", "h100", a_nodes)), cluster("b", pool("p1", "h100", b_nodes))]


CASES = [
    Case("no clusters", [H100, deployment("m", 1)], {"m": []}, reasons={"m": "NoClusters"}),
    Case("single cluster", [H100, A1, deployment("m", 1)], {"m": ["a#0"]},
         reasons={"m": "ReplicasCreated"}),
    Case("multi-node gang needs enough nodes",
         [H100, cluster("a", pool("p1", "h100", 2)), cluster("b", pool("p1", "h100", 3)),
          deployment("m", 1, gang(leader_gpus=1, worker_nodes=2, worker_gpus=1))],
         {"m": ["b#0"]}),
    Case("retain on pinned cluster even if another is viable",
         [*two(1, 1), deployment("m", 1)], {"m": ["b#0"]},
         previous=prev(("m", "b", 0, {"main": "p1"}))),
    Case("deleted cluster: replica re-placed",
         [*two(1, 1), deployment("m", 1)], {"m": ["a#0"]},
         previous=prev(("m", "gone", 0, {"main": "p1"}))),
    Case("scale up onto additional clusters",
         [*two(1, 1), deployment("m", 2)], {"m": ["a#0", "b#0"]},
         previous=prev(("m", "a", 0, {"main": "p1"}))),
    Case("scale up without capacity keeps retained only",
         [H100, A1, deployment("m", 2)], {"m": ["a#0"]},
         previous=prev(("m", "a", 0, {"main": "p1"})), reasons={"m": "PartialCapacity"}),
    Case("pack onto one cluster when it is the only option",
         [H100, cluster("a", pool("p1", "h100", 3)), deployment("m", 3)],
         {"m": ["a#0", "a#1", "a#2"]}),
    Case("spread before packing", [*two(2, 2), deployment("m", 2)], {"m": ["a#0", "b#0"]}),
    Case("three replicas spread then pack", [*two(2, 2), deployment("m", 3)],
         {"m": ["a#0", "a#1", "b#0"]}),
    Case("capacity forces packing", [*two(3, 1), deployment("m", 4)],
         {"m": ["a#0", "a#1", "a#2", "b#0"]}),
    Case("new replica spreads to an empty cluster first",
         [H100, *(cluster(n, pool("p1", "h100", 5)) for n in "abc"), deployment("m", 3)],
         {"m": ["a#0", "a#1", "b#0"]},
         previous=prev(("m", "a", 0, {"main": "p1"}), ("m", "a", 1, {"main": "p1"}))),
    Case("lowest free index (worked example 10)",
         [H100, cluster("a", pool("p1", "h100", 5)), deployment("m", 3)],
         {"m": ["a#0", "a#1", "a#2"]},
         previous=prev(("m", "a", 0, {"main": "p1"}), ("m", "a", 2, {"main": "p1"}))),
    Case("scale down drops the highest index",
         [H100, cluster("a", pool("p1", "h100", 5)), deployment("m", 2)],
         {"m": ["a#0", "a#1"]},
         previous=prev(*(("m", "a", i, {"main": "p1"}) for i in range(3)))),
    Case("scale down drops from the most-loaded cluster",
         [*two(5, 5), deployment("m", 2)], {"m": ["a#0", "b#0"]},
         previous=prev(("m", "a", 0, {"main": "p1"}), ("m", "b", 0, {"main": "p1"}),
                       ("m", "b", 1, {"main": "p1"}))),
    Case("scale down ties go to the later cluster name",
         [*two(5, 5), deployment("m", 1)], {"m": ["a#0"]},
         previous=prev(("m", "a", 0, {"main": "p1"}), ("m", "b", 0, {"main": "p1"}))),
    Case("co-located replicas are both retained",
         [*two(2, 2), deployment("m", 2)], {"m": ["a#0", "a#1"]},
         previous=prev(("m", "a", 0, {"main": "p1"}), ("m", "a", 1, {"main": "p1"}))),
    Case("alphabetical new placement regardless of declaration order",
         [H100, B1, A1, deployment("m", 1)], {"m": ["a#0"]}),
    Case("other deployments consume capacity (worked example 6)",
         [H100, cluster("a", pool("p1", "h100", 2)), deployment("m", 3), deployment("other", 1)],
         {"m": ["a#0"], "other": ["a#0"]}, reasons={"m": "PartialCapacity"},
         previous=prev(("other", "a", 0, {"main": "p1"}))),
    Case("own retained replicas are not double-counted",
         [H100, cluster("a", pool("p1", "h100", 2)), deployment("m", 2)], {"m": ["a#0", "a#1"]},
         previous=prev(("m", "a", 0, {"main": "p1"}))),
    Case("replica pinned to an unknown cluster is ignored",
         [H100, A1, deployment("m", 1)], {"m": ["a#0"]},
         previous=prev(("m", "", 3, {"main": "p1"}))),
    Case("another deployment pinned to a deleted pool consumes nothing",
         [H100, A1, deployment("a-dep", 1), deployment("z-other", 1)],
         {"a-dep": ["a#0"], "z-other": []},
         previous=prev(("z-other", "a", 0, {"main": "old-pool"}))),
    Case("colliding (cluster, index) retained deterministically: first by name wins",
         [H100, cluster("a", pool("p1", "h100", 1), pool("p2", "h100", 1)), deployment("m", 1)],
         {"m": ["a#0"]}, pools={"m": [("p2",)]},
         previous=prev(("m", "a", 0, {"main": "p1"}, "m-zzzzz"), ("m", "a", 0, {"main": "p2"}, "m-aaaaa"))),
    Case("retained replica is charged at its current spec's cost (divergence: not its old one)",
         # 'm' was placed with copies=1; its spec now says copies=2: it keeps its pin and
         # charges 2 of the 3 nodes, so 'n' gets one replica, not two.
         [H100, cluster("a", pool("p1", "h100", 3)),
          deployment("m", 1, engine("main", standalone(), copies=2)), deployment("n", 2)],
         {"m": ["a#0"], "n": ["a#0"]}, reasons={"n": "PartialCapacity"},
         previous=prev(("m", "a", 0, {"main": "p1"}))),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_schedule(case: Case) -> None:
    check(case)


def test_device_accounting_agrees_on_whole_node_engines() -> None:
    # With one GPU per node and one GPU per pod, both ledgers are the same ledger.
    for case in CASES:
        check(Case(case.name, case.docs, case.want, case.previous, "Device", case.reasons, case.pools))
