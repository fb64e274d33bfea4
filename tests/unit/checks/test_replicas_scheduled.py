from modelplane.checks import run_checks
from modelplane.scheduler import place_fleet

from .fleets import NOMINAL_CEL, base, deployment, existing_cluster, fleet, messages

POLICY = "replicas-fully-scheduled"
FIX = ("`pulumi up` would run it below spec.replicas without an error. Fix: add capacity to an "
       "eligible pool (nodeCount), widen clusterSelector or the device selectors, tolerate the "
       "taints in the way, or lower spec.replicas.")


def test_all_replicas_placed_passes():
    assert messages(base(deployment=deployment(replicas=2)), POLICY) == []


def test_parked_deployment_passes():
    assert messages(base(deployment=deployment(replicas=0)), POLICY) == []


def test_partial_shortfall_fails():
    # The reference would say ReplicasScheduled=True here: 2 of 3 is "scheduled".
    got = messages(base(deployment=deployment(replicas=3), cluster=existing_cluster(nodes=2)), POLICY)
    assert got == [
        "[mandatory] replicas-fully-scheduled: ModelDeployment/ml-team/llama (fleet.yaml#2) spec.replicas: "
        "2 of 3 replicas placed (ReplicasScheduled=False, PartialCapacity: Scheduled 2 of 3 replicas). "
        "Scheduler: replica 2: byo: engine vllm: short by 8 devices in pool h100. " + FIX
    ]


def test_none_placed_fails_with_the_scheduler_explanation():
    got = messages(base(deployment=deployment(NOMINAL_CEL)), POLICY)
    assert got == [
        "[mandatory] replicas-fully-scheduled: ModelDeployment/ml-team/llama (fleet.yaml#2) spec.replicas: "
        "0 of 1 replicas placed (ReplicasScheduled=False, InsufficientCapacity: 0 of 1 replicas scheduled "
        "(checked 1 cluster)). Scheduler: replica 0: byo: no pool for engine vllm: pool h100: member 0 "
        "(Standalone) request 'gpu' matched no device. " + FIX
    ]


def test_placement_json_is_accepted():
    f = fleet(*base(deployment=deployment(replicas=3)))
    as_json = place_fleet(f).to_json()
    got = [x for x in run_checks(f, as_json) if x.policy == POLICY]
    assert [x.field for x in got] == ["spec.replicas"]
