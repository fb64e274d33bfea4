"""Decisions go through the scheduler's public API: the replicas land where `place_fleet`
puts a manifest asking for that many, and a scale-up it refuses (budget, spread,
capacity) is a ScalingLimited=True PlacementLimited condition with the scheduler's
reasons and feasibility verdicts, never dropped."""

from __future__ import annotations

from modelplane.api import load_manifest_text
from modelplane.autoscale import FileMetricsSource, History
from modelplane.autoscale import conditions as c
from modelplane.autoscale.scaled_placement import current_replicas, decide_fleet, place_decisions, scaled_fleet
from modelplane.scheduler import place_fleet
from tests.manifests import (
    cluster,
    deployment,
    fleet_budget,
    gpu_class,
    placement_policy,
    pool,
    replica_autoscaler,
    spread,
    to_yaml,
)

NOW = 1_000_000.0


def fleet_docs(replicas: int = 1, nodes: int = 2, budget: int | None = None, per_cluster: int | None = None,
               max_replicas: int = 8) -> list[dict]:
    policy = placement_policy(spread("modelplane.ai/cluster", per_group=per_cluster)) if per_cluster else None
    docs = [gpu_class("g1", 1), cluster("east", pool("gpu", "g1", nodes), labels={"region": "us"}),
            cluster("west", pool("gpu", "g1", nodes), labels={"region": "eu"}),
            deployment("chat", replicas, namespace="ml", policy=policy),
            deployment("batch", 1, namespace="ml"),
            replica_autoscaler("chat", "chat", max_replicas, namespace="ml")]
    if budget is not None:
        docs.append(fleet_budget("ml-gpus", budget, namespaces=["ml"]))
    return docs


def run(docs: list[dict], queue: float, previous=None):
    fleet = load_manifest_text(to_yaml(docs))
    decisions = decide_fleet(fleet, FileMetricsSource({("ml", "chat"): {"QueueDepth": queue}}), NOW, previous)
    return fleet, decisions, *place_decisions(fleet, decisions, previous)


def test_scaled_fleet_copies_and_changes_only_the_decided_deployments() -> None:
    fleet = load_manifest_text(to_yaml(fleet_docs(replicas=1)))
    before = fleet.to_documents()
    scaled = scaled_fleet(fleet, {("ml", "chat"): 5})
    assert fleet.to_documents() == before
    assert scaled.deployments[("ml", "chat")].spec.replicas == 5
    assert scaled.deployments[("ml", "batch")] is fleet.deployments[("ml", "batch")]
    assert scaled.source_of(scaled.deployments[("ml", "chat")]) == fleet.source_of(fleet.deployments[("ml", "chat")])


def test_new_replicas_go_where_the_scheduler_puts_a_manifest_asking_for_them() -> None:
    fleet, decisions, placement, (outcome,) = run(fleet_docs(replicas=1), queue=12)
    assert (decisions[("ml", "chat")].current, decisions[("ml", "chat")].desired) == (1, 3)
    by_hand = place_fleet(load_manifest_text(to_yaml(fleet_docs(replicas=3))))
    assert placement.to_json() == by_hand.to_json()
    assert outcome.placed == 3
    assert outcome.limited.status == c.FALSE and outcome.limited.reason == c.DESIRED_WITHIN_RANGE
    assert sorted(r.cluster for r in placement.find("ml", "chat").replicas) == ["east", "west", "west"]


def test_a_scale_up_a_budget_refuses_is_scaling_limited_with_the_verdict() -> None:
    _, _, placement, (outcome,) = run(fleet_docs(replicas=1, nodes=4, budget=3), queue=20)
    assert outcome.decision.desired == 5
    assert outcome.placed == 2   # batch took one of the 3 devices
    assert outcome.limited.status == c.TRUE and outcome.limited.reason == c.PLACEMENT_LIMITED
    assert outcome.limited.message.startswith(
        "the scheduler placed 2 of the 5 replica(s) asked for (scaled up from 1): replica #2 refused by east: "
        "FleetBudget ml-gpus:")
    assert "replica #2: Blocked: FleetBudget ml-gpus: a replica needs 1 device, 0 of 3 left" in \
        outcome.limited.message
    assert [u["verdict"] for u in outcome.unplaced] == ["Blocked", "Blocked", "Blocked"]
    assert outcome.to_json()["placed"] == 2
    assert [x.type for x in outcome.conditions()] == [c.ABLE_TO_SCALE, c.SCALING_ACTIVE, c.SCALING_LIMITED]
    assert placement.find("ml", "chat").condition("ReplicasScheduled").reason == "PartialCapacity"


def test_a_scale_up_spread_refuses_is_scaling_limited() -> None:
    _, _, _, (outcome,) = run(fleet_docs(replicas=1, nodes=4, per_cluster=1), queue=12)
    assert (outcome.decision.desired, outcome.placed) == (3, 2)
    assert outcome.limited.reason == c.PLACEMENT_LIMITED
    assert ("replica #2 refused by east: spread modelplane.ai/cluster: group east already has 1 replica(s) "
            "(maxReplicasPerGroup 1)") in outcome.limited.message
    assert outcome.unplaced == ({"index": 2, "verdict": "Blocked", "message": "every cluster that could hold it "
                                 "refuses it by policy: spreadConstraints (east, west)"},)


def test_a_scale_up_capacity_refuses_says_what_would_fit_after_a_pool_scale_up() -> None:
    _, _, _, (outcome,) = run(fleet_docs(replicas=1, nodes=1), queue=16)
    assert (outcome.decision.desired, outcome.placed) == (4, 1)
    assert "short by 1 device in pool gpu" in outcome.limited.message
    assert [u["verdict"] for u in outcome.unplaced] == ["FitsAfterScaleUp"] * 3


def test_limits_of_the_decision_and_of_placement_are_both_told() -> None:
    _, _, _, (outcome,) = run(fleet_docs(replicas=2, nodes=1, max_replicas=3), queue=40)
    assert outcome.decision.desired == 3
    assert outcome.limited.reason == c.PLACEMENT_LIMITED
    assert outcome.limited.message.endswith("the autoscaler was already limited: TooManyReplicas: the desired "
                                            "replica count is more than the maximum replica count")


def test_current_is_the_previous_placement_count_when_there_is_one() -> None:
    fleet, _, placement, _ = run(fleet_docs(replicas=1), queue=12)
    assert current_replicas(fleet, ("ml", "chat"), None) == 1
    assert current_replicas(fleet, ("ml", "chat"), placement) == 3
    # the next decision starts from 3 and keeps the replicas already placed
    _, decisions, again, _ = run(fleet_docs(replicas=1), queue=4, previous=placement)
    assert (decisions[("ml", "chat")].current, decisions[("ml", "chat")].desired) == (3, 3)
    assert again.find("ml", "chat").replicas == placement.find("ml", "chat").replicas


def test_a_deployment_without_metrics_holds_and_others_are_untouched() -> None:
    fleet = load_manifest_text(to_yaml(fleet_docs(replicas=2)))
    decisions = decide_fleet(fleet, FileMetricsSource({}), NOW)
    assert decisions[("ml", "chat")].desired == 2
    assert decisions[("ml", "chat")].reason == c.FAILED_GET_METRICS
    placement, (outcome,) = place_decisions(fleet, decisions)
    assert placement.to_json() == place_fleet(fleet).to_json()
    assert outcome.decision.history == History()
