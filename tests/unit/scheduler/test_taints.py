"""Drain with taints and tolerations (semantics §7): mirrors the reference's
TestScheduleTaints, in both accounting modes."""

import pytest

from .helpers import H100, Case, check, cluster, deployment, pool, prev

MAINT = {"key": "maint", "operator": "Exists"}


def fleet(a_taints=None, b_taints=None, b=True) -> list[dict]:
    docs = [H100, cluster("a", pool("p1", "h100", 2), taints=a_taints)]
    if b:
        docs.append(cluster("b", pool("p1", "h100", 2), taints=b_taints))
    return docs


ON_A = prev(("m", "a", 0, {"main": "p1"}))
NS = [{"key": "maint", "effect": "NoSchedule"}]
NX = [{"key": "maint", "effect": "NoExecute"}]

CASES = [
    Case("NoSchedule keeps new replicas off", [*fleet(NS), deployment("m", 2)],
         {"m": ["b#0", "b#1"]}),
    Case("NoSchedule leaves existing replicas", [*fleet(NS), deployment("m", 1)],
         {"m": ["a#0"]}, previous=ON_A),
    Case("toleration allows placement", [*fleet(NS, b=False), deployment("m", 1, tolerations=[MAINT])],
         {"m": ["a#0"]}),
    Case("NoExecute drains and re-places (worked example 8)", [*fleet(NX), deployment("m", 1)],
         {"m": ["b#0"]}, previous=ON_A),
    Case("NoExecute toleration retains (worked example 8)",
         [*fleet(NX), deployment("m", 1, tolerations=[MAINT])], {"m": ["a#0"]}, previous=ON_A),
    Case("drain with nowhere to go leaves the count unmet",
         [*fleet(NX, b=False), deployment("m", 1)], {"m": []}, previous=ON_A,
         reasons={"m": "InsufficientCapacity"}),
    Case("NoSchedule toleration does not cover NoExecute",
         [*fleet(NX), deployment("m", 1, tolerations=[{"key": "maint", "operator": "Exists",
                                                        "effect": "NoSchedule"}])],
         {"m": ["b#0"]}, previous=ON_A),
    Case("a second untolerated taint still repels",
         [*fleet([*NS, {"key": "gpu-upgrade", "effect": "NoSchedule"}]),
          deployment("m", 1, tolerations=[MAINT])], {"m": ["b#0"]}),
    Case("Equal matches on value",
         [*fleet([{"key": "maint", "value": "yes", "effect": "NoSchedule"}], b=False),
          deployment("m", 1, tolerations=[{"key": "maint", "operator": "Equal", "value": "yes"}])],
         {"m": ["a#0"]}),
    Case("Equal with another value does not tolerate",
         [*fleet([{"key": "maint", "value": "yes", "effect": "NoSchedule"}], b=False),
          deployment("m", 1, tolerations=[{"key": "maint", "operator": "Equal", "value": "no"}])],
         {"m": []}),
    Case("keyless Exists tolerates everything",
         [*fleet([*NS, *NX, {"key": "x", "value": "y", "effect": "NoExecute"}], b=False),
          deployment("m", 2, tolerations=[{"operator": "Exists"}])],
         {"m": ["a#0", "a#1"]}, previous=ON_A),
    Case("removing a taint never moves replicas back",
         [*fleet(), deployment("m", 1)], {"m": ["b#0"]}, previous=prev(("m", "b", 0, {"main": "p1"}))),
]


@pytest.mark.parametrize("accounting", ["Node", "Device"])
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_taints(case: Case, accounting: str) -> None:
    check(Case(case.name, case.docs, case.want, case.previous, accounting, case.reasons))
