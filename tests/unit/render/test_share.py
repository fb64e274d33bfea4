"""A fleet split across stacks (modelplane.plan.share): shard layouts, and shares that plan
each cluster exactly as the whole fleet's plan does, after the trip through the engine."""

import json

import pytest

from modelplane.plan import PlanError, plan_fleet
from modelplane.plan.share import Share, fleet_shares, plan_shard, shard_layout, stack_layout
from modelplane.scheduler import place_fleet
from tests.engine_values import through_the_engine

from .fleets import full_fleet
from .test_fleet import _placement


@pytest.mark.parametrize(("size", "expected"), [
    (1, {"a": ("a",), "b": ("b",), "c": ("c",)}),
    (2, {"shard-000": ("a", "b"), "shard-001": ("c",)}),
    (5, {"shard-000": ("a", "b", "c")}),
])
def test_shard_layout_chunks_sorted_cluster_names(size, expected):
    assert shard_layout(["c", "a", "b"], size) == expected


def test_shard_layout_refuses_an_empty_shard_size():
    with pytest.raises(PlanError, match="at least 1"):
        shard_layout(["a"], 0)


def test_the_control_plane_runs_in_its_clusters_shard_or_a_shard_of_its_own():
    fl = full_fleet()
    inside = stack_layout(fl, "kind-a", 2)
    assert inside.control in inside.shards and "kind-a" in inside.shards[inside.control]
    outside = stack_layout(fl, "control", 1)
    assert outside.control == "control" and outside.shards["control"] == ()
    assert set(outside.shards) == set(fl.clusters) | {"control"}
    with pytest.raises(PlanError, match="controlPlane.name"):
        stack_layout(fl, "shard-000", 2)   # not a fleet cluster, yet a shard's name


@pytest.mark.parametrize("size", [1, 2, 3])
def test_each_share_plans_its_clusters_exactly_as_the_fleet_plan(size):
    fl = full_fleet()
    for placement in (_placement(fl), place_fleet(fl)):
        whole = plan_fleet(fl, placement)
        layout = stack_layout(fl, "control", size)
        shares = fleet_shares(fl, placement, layout.shards, layout.control)
        planned = {}
        for share in shares.values():
            text = json.dumps(through_the_engine(share.to_json()))
            planned.update(plan_shard(fl, Share.from_json(json.loads(text))))
        assert planned == whole.clusters
        # every route reaches the control plane's shard, and only it
        assert shares["control"].control_routes == whole.routes
        assert all(s.control_routes is None for name, s in shares.items() if name != "control")


def test_a_share_carries_only_its_own_replicas():
    fl = full_fleet()
    placement = _placement(fl)
    shares = fleet_shares(fl, placement, shard_layout(list(fl.clusters), 1))
    for cluster, share in shares.items():
        replicas = [r for d in share.placement.deployments for r in d.replicas]
        assert {r.cluster for r in replicas} <= {cluster}
        assert len(replicas) == sum(1 for d in placement.deployments for r in d.replicas if r.cluster == cluster)


def test_a_shard_refuses_a_share_placed_from_other_manifests():
    fl = full_fleet()
    share = next(iter(fleet_shares(fl, _placement(fl), shard_layout(list(fl.clusters), 1)).values()))
    changed = full_fleet()
    deployment = next(iter(changed.deployments.values()))
    deployment.spec.replicas += 1
    with pytest.raises(PlanError, match="digests differ"):
        plan_shard(changed, share)


def test_a_share_of_another_version_or_shape_is_a_clean_error():
    fl = full_fleet()
    share = next(iter(fleet_shares(fl, _placement(fl), shard_layout(list(fl.clusters), 1)).values())).to_json()
    with pytest.raises(PlanError, match="version"):
        Share.from_json({**share, "version": 99})
    with pytest.raises(PlanError, match="unreadable"):
        Share.from_json({**share, "facts": []})
