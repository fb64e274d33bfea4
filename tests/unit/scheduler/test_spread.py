"""spreadConstraints (issue 14): named scenarios with expected placements, conditions
and verdicts. Node accounting, one-GPU nodes, unless a case says otherwise."""

import pytest

from .helpers import H100, PolicyCase, check_policy, cluster, deployment, placement_policy, pool, prev, spread

REGION = "topology.kubernetes.io/region"


def c(name: str, nodes: int, region: str | None = None, max_nodes: int | None = None) -> dict:
    return cluster(name, pool("p1", "h100", nodes, max_nodes=max_nodes), labels={REGION: region} if region else None)


def dep(replicas: int, *rules: dict, name: str = "m") -> dict:
    return deployment(name, replicas, policy=placement_policy(*rules))


A_A_B = [H100, c("a1", 2, "a"), c("a2", 2, "a"), c("b1", 2, "b")]
OK = ("True", "Satisfied")

CASES = [
    PolicyCase("without a rule, clusters spread alphabetically within one region",
               [*A_A_B, deployment("m", 2)], {"m": ["a1#0", "a2#0"]}),
    PolicyCase("minGroups 2 sends the second replica to the other region",
               [*A_A_B, dep(2, spread(REGION, 2))], {"m": ["a1#0", "b1#0"]},
               conditions={"m": {"SpreadSatisfied": OK, "ReplicasScheduled": ("True", "ReplicasCreated")}}),
    PolicyCase("minGroups prefers new groups, then spreads by load",
               [*A_A_B, dep(4, spread(REGION, 2))], {"m": ["a1#0", "a1#1", "a2#0", "b1#0"]},
               conditions={"m": {"SpreadSatisfied": OK}}),
    PolicyCase("maxReplicasPerGroup 1: the third replica is a shortfall with the spread reason",
               [*A_A_B, dep(3, spread(REGION, per_group=1))], {"m": ["a1#0", "b1#0"]},
               conditions={"m": {"ReplicasScheduled": ("False", "PartialCapacity"), "SpreadSatisfied": OK}},
               verdicts={"m": ["Blocked"]}),
    PolicyCase("maxGroups 1 keeps the replicas in the first region; more would need region a to grow",
               [H100, c("a1", 1, "a"), c("a2", 1, "a"), c("b1", 5, "b"), dep(3, spread(REGION, max_groups=1))],
               {"m": ["a1#0", "a2#0"]},
               conditions={"m": {"SpreadSatisfied": OK}}, verdicts={"m": ["FitsAfterScaleUp"]}),
    PolicyCase("minGroups out of reach: a shortfall, not a silent one-region spread",
               [H100, c("a1", 2, "a"), c("b1", 0, "b"), dep(2, spread(REGION, 2))], {"m": ["a1#0"]},
               conditions={"m": {"SpreadSatisfied": ("False", "TooFewGroups"),
                                 "ReplicasScheduled": ("False", "PartialCapacity")}},
               verdicts={"m": ["FitsAfterScaleUp"]}),
    PolicyCase("spread by cluster name: one replica per cluster",
               [H100, c("a1", 5), c("a2", 5), dep(3, spread("modelplane.ai/cluster", per_group=1))],
               {"m": ["a1#0", "a2#0"]}, verdicts={"m": ["Blocked"]}),
    PolicyCase("a cluster without the label is in no group and takes no replica",
               [H100, c("a1", 1, "a"), c("x", 5), dep(2, spread(REGION))], {"m": ["a1#0"]},
               verdicts={"m": ["FitsAfterScaleUp"]}),
    PolicyCase("fewer replicas than minGroups: the condition says why",
               [*A_A_B, dep(1, spread(REGION, 2))], {"m": ["a1#0"]},
               conditions={"m": {"SpreadSatisfied": ("False", "TooFewGroups"),
                                 "ReplicasScheduled": ("True", "ReplicasCreated")}}),
    PolicyCase("kept replicas over a new maxReplicasPerGroup stay where they are, reported",
               [*A_A_B, dep(2, spread(REGION, per_group=1))], {"m": ["a1#0", "a2#0"]},
               previous=prev(("m", "a1", 0, {"main": "p1"}), ("m", "a2", 0, {"main": "p1"})),
               conditions={"m": {"SpreadSatisfied": ("False", "GroupOverfilled")}}),
    PolicyCase("two rules at once: two regions, at most one replica per cluster",
               [*A_A_B, dep(3, spread(REGION, 2), spread("modelplane.ai/cluster", per_group=1))],
               {"m": ["a1#0", "a2#0", "b1#0"]}, conditions={"m": {"SpreadSatisfied": OK}}),
    PolicyCase("Device accounting: the same rules",
               [H100, c("a1", 2, "a"), c("b1", 2, "b"), dep(2, spread(REGION, 2))], {"m": ["a1#0", "b1#0"]},
               accounting="Device", conditions={"m": {"SpreadSatisfied": OK}}),
    PolicyCase("parked deployment: nothing to spread",
               [*A_A_B, dep(0, spread(REGION, 2))], {"m": []},
               conditions={"m": {"SpreadSatisfied": ("True", "ScaledToZero")}}),
]


@pytest.mark.parametrize("case", CASES, ids=str)
def test_spread(case: PolicyCase) -> None:
    check_policy(case)


def test_unplaced_reason_names_the_rule() -> None:
    fp = check_policy(CASES[3])
    reasons = fp.find("default", "m").unplaced[0].reasons
    assert reasons["a2"].message == f"spread {REGION}: group a already has 1 replica(s) (maxReplicasPerGroup 1)"
    assert fp.find("default", "m").unplaced[0].feasibility.message == (
        "every cluster that could hold it refuses it by policy: spreadConstraints (a1, a2, b1)")


def test_json_reports_groups() -> None:
    fp = check_policy(CASES[1])
    block = fp.to_json()["deployments"][0]["placementPolicy"]
    assert block == {"spread": [{"topologyKey": REGION, "groups": {"a": 1, "b": 1}}]}
