from .fleets import base, existing_cluster, messages

POLICY = "declared-capacity"
TAIL = ("The scheduler uses the observed count while the cluster is reachable and falls back to "
        "the declared one when it is not")


def test_matching_or_unknown_counts_pass():
    assert messages(base(), POLICY) == []
    assert messages(base(), POLICY, observed={"byo": {"h100": 2}}) == []
    assert messages(base(), POLICY, observed={"elsewhere": {"h100": 9}}) == []


def test_removed_node_still_declared_is_advisory():
    assert messages(base(cluster=existing_cluster(nodes=3)), POLICY, observed={"byo": {"h100": 2}}) == [
        "[advisory] declared-capacity: InferenceCluster/byo (fleet.yaml#1) spec.nodePools[0].nodeCount: "
        "pool 'h100' declares nodeCount 3 but the cluster reports 2 node(s) labelled modelplane.ai/pool=h100. "
        + TAIL + ", where it would count 1 node(s) that do not exist, so replicas placed on them stay "
        "Pending. Fix: set nodeCount: 2, or restore the pool to 3 node(s)."
    ]


def test_added_node_not_declared_is_advisory():
    assert messages(base(), POLICY, observed={"byo": {"h100": 4}}) == [
        "[advisory] declared-capacity: InferenceCluster/byo (fleet.yaml#1) spec.nodePools[0].nodeCount: "
        "pool 'h100' declares nodeCount 2 but the cluster reports 4 node(s) labelled modelplane.ai/pool=h100. "
        + TAIL + ", where it would count none of the 2 extra node(s), which sit idle. Fix: set "
        "nodeCount: 4, or restore the pool to 2 node(s)."
    ]


def test_autoscaled_pool_is_checked_against_its_range():
    scaled = existing_cluster().replace("nodeCount: 2", "nodeCount: 1\n    minNodeCount: 1\n    maxNodeCount: 4")
    assert messages(base(cluster=scaled), POLICY, observed={"byo": {"h100": 3}}) == []
    assert messages(base(cluster=scaled), POLICY, observed={"byo": {"h100": 6}}) == [
        "[advisory] declared-capacity: InferenceCluster/byo (fleet.yaml#1) spec.nodePools[0].maxNodeCount: "
        "pool 'h100' autoscales 1..4 but the cluster reports 6 node(s) labelled modelplane.ai/pool=h100, "
        "outside that range. " + TAIL + ". Fix: set maxNodeCount: 6, or bring the pool back within "
        "maxNodeCount 4."
    ]


def test_autoscaled_pool_below_its_minimum_is_advisory():
    scaled = existing_cluster().replace("nodeCount: 2", "nodeCount: 2\n    minNodeCount: 2\n    maxNodeCount: 4")
    assert messages(base(cluster=scaled), POLICY, observed={"byo": {"h100": 1}}) == [
        "[advisory] declared-capacity: InferenceCluster/byo (fleet.yaml#1) spec.nodePools[0].minNodeCount: "
        "pool 'h100' autoscales 2..4 but the cluster reports 1 node(s) labelled modelplane.ai/pool=h100, "
        "outside that range. " + TAIL + ". Fix: set minNodeCount: 1, or bring the pool back within "
        "minNodeCount 2."
    ]
