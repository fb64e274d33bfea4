"""Feasibility of every unplaced replica (issue 14, OCM enhancement #193): NotFeasible,
FitsAfterScaleUp (which pool, how many nodes, within maxNodeCount or not) or Blocked."""

import pytest

from .helpers import (
    H100,
    PolicyCase,
    check_policy,
    cluster,
    deployment,
    engine,
    fleet_budget,
    gang,
    gpu_class,
    of,
    plan,
    pool,
    standalone,
    taint,
)

H8 = gpu_class("h100x8", 8, "81559Mi")
NF, UP, BL = "NotFeasible", "FitsAfterScaleUp", "Blocked"


def two_gpu(replicas: int, **kw) -> dict:
    return deployment("m", replicas, engine("main", standalone(gpus=2)), **kw)


CASES = [
    PolicyCase("more GPUs a pod than any node has: NotFeasible",
               [H8, cluster("a", pool("p", "h100x8", 4)), deployment("m", 1, engine("main", standalone(gpus=16)))],
               {"m": []}, verdicts={"m": [NF]}),
    PolicyCase("no cluster matches the selectors: NotFeasible",
               [H8, cluster("a", pool("p", "h100x8", 4)), deployment("m", 1, selector={"region": "mars"})],
               {"m": []}, verdicts={"m": [NF]}),
    PolicyCase("short of nodes: FitsAfterScaleUp, one replica after another",
               [H8, cluster("a", pool("p", "h100x8", 1)), deployment("m", 3, engine("main", standalone(gpus=8)))],
               {"m": ["a#0"]}, verdicts={"m": [UP, UP]}),
    PolicyCase("the only pool that fits is on a tainted cluster: Blocked",
               [H8, cluster("a", pool("p", "h100x8", 4), taints=[taint("maint")]), two_gpu(1)],
               {"m": []}, verdicts={"m": [BL]}),
    PolicyCase("a tainted cluster with room and another that can grow: grow the other",
               [H8, cluster("a", pool("p", "h100x8", 4), taints=[taint("maint")]),
                cluster("b", pool("p", "h100x8", 0)), two_gpu(1)],
               {"m": []}, verdicts={"m": [UP]}),
    PolicyCase("budget first: room after scale-up does not help past the budget",
               [H8, cluster("a", pool("p", "h100x8", 0)), two_gpu(2, namespace="ml"),
                fleet_budget("ml", 2, namespaces=["ml"])],
               {"m": []}, verdicts={"m": [UP, BL]}, namespace="ml"),
    PolicyCase("a gang in Node accounting needs one node a pod",
               [H100, cluster("a", pool("p1", "h100", 1)), deployment("m", 1, gang(leader_gpus=1, worker_nodes=3,
                                                                                   worker_gpus=1))],
               {"m": []}, verdicts={"m": [UP]}),
]


@pytest.mark.parametrize("case", CASES, ids=str)
def test_feasibility(case: PolicyCase) -> None:
    check_policy(case)


def feasibility(fp, name="m", ns="default"):
    return [u.feasibility for u in of(fp, name, ns).unplaced]


def test_scale_up_counts_the_replicas_before_it() -> None:
    f1, f2 = feasibility(check_policy(CASES[2]))
    assert (f1.cluster, dict(f1.scale_up)) == ("a", {"p": 1})
    assert (f2.cluster, dict(f2.scale_up)) == ("a", {"p": 2})
    assert f1.message == "fits on a after adding 1 node to pool p (1 -> 2 nodes: raise nodeCount from 1 to 2)"


def test_gang_needs_three_more_nodes() -> None:
    (f,) = feasibility(check_policy(CASES[6]))
    assert dict(f.scale_up) == {"p1": 3}    # leader + 3 workers: 4 pods, 4 nodes, 1 there
    assert f.message.startswith("fits on a after adding 3 nodes to pool p1")


@pytest.mark.parametrize("declared, observed, replicas, want", [
    ({"nodes": 1, "max_nodes": 4}, {"a": {"p": 1}}, 2,
     "(1 observed -> 2 nodes, within maxNodeCount 4: the autoscaler can add them)"),
    ({"nodes": 1, "max_nodes": 2}, None, 3, "(2 -> 3 nodes: raise maxNodeCount from 2 to 3)"),
    ({"nodes": 3}, {"a": {"p": 1}}, 2, "(1 observed -> 2 nodes: nodeCount 3 already asks for them)"),
    ({"nodes": 1}, None, 2, "(1 -> 2 nodes: raise nodeCount from 1 to 2)"),
], ids=["within maxNodeCount", "past maxNodeCount", "nodeCount not yet reached", "fixed pool"])
def test_scale_up_says_what_to_change(declared, observed, replicas, want) -> None:
    docs = [H8, cluster("a", pool("p", "h100x8", **declared)),
            deployment("m", replicas, engine("main", standalone(gpus=8)))]
    fp = plan(docs, accounting="Device", observed=observed)
    f = feasibility(fp)[0]
    assert f.verdict == UP and f.message.endswith(want), f.message


def test_not_feasible_names_the_clusters() -> None:
    (f,) = feasibility(check_policy(CASES[0]))
    assert f.message.startswith("no pool of the 1 cluster the selectors match could ever hold it, at any size "
                                "(first, a: no pool for engine main: pool p: member 0 (Standalone) request 'gpu' "
                                "matched too few devices (needs 16")


def test_json_carries_the_verdict() -> None:
    doc = check_policy(CASES[2]).to_json()
    u = doc["deployments"][0]["unplaced"][0]
    assert u["feasibility"] == {"verdict": UP, "cluster": "a", "scaleUp": {"p": 1},
                                "message": "fits on a after adding 1 node to pool p "
                                           "(1 -> 2 nodes: raise nodeCount from 1 to 2)"}


def test_a_fabric_group_no_pool_of_which_matches_a_member_is_not_feasible() -> None:
    """Device fit's NoPoolFits is a refusal of kind NEVER: here no pool hosts the whole engine
    and its one fabric group has no pool for the Leader, so no size of the cluster holds it.
    (Before refusals had kinds, this read Blocked: "no cluster can grow to hold it".)"""
    from .test_fabric import COORDINATED, fleet

    docs = [*fleet(None, "ib-1", extra=(pool("gpu2", "h100x8", 2, domain="ib-1"),)), deployment("m", 1, COORDINATED)]
    (f,) = feasibility(plan(docs, accounting="Node"))
    assert f.verdict == NF
    assert f.message.startswith("no pool of the 1 cluster the selectors match could ever hold it, at any size "
                                "(first, a: no pool for engine main: ")
