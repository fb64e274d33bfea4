"""A fleet split across stacks (modelplane.plan.share): shard layouts, and shares that plan
each cluster exactly as the whole fleet's plan does, after the trip through the engine."""

import copy
import json
from pathlib import Path

import pytest

from modelplane.api import load_documents
from modelplane.plan import PlanError, plan_fleet
from modelplane.plan.share import (
    FleetDigests,
    Share,
    fleet_shares,
    plan_shard,
    shard_digest,
    shard_layout,
    stack_layout,
)
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


# ---- shard_digest: equal digests, equal plans (what `modelplane preview` skips on) -----------

def _example(name: str):
    from modelplane.commands.output import load_fleet
    return load_fleet(str(Path(__file__).parents[3] / "examples" / name))


def _benchmark_fleet():
    from benchmarks import scale_fleet
    return load_documents(scale_fleet.fleet(12, 12, replicas=3))


def _digests_and_plans(fl, size: int) -> tuple[dict[str, str], dict[str, dict]]:
    placement = place_fleet(fl)
    layout = stack_layout(fl, "control", size)
    shares = fleet_shares(fl, placement, layout.shards, layout.control)
    digests = FleetDigests(fl)
    out_digests, plans = {}, {}
    for shard, share in shares.items():
        text = json.dumps(share.to_json())
        out_digests[shard] = shard_digest(digests, json.loads(text), control=shard == layout.control)
        plans[shard] = plan_shard(fl, Share.from_json(json.loads(text)))
    return out_digests, plans


def _deployment_doc(docs: list[dict], index: int) -> dict:
    deployments = [d for d in docs if d["kind"] == "ModelDeployment"]
    return deployments[index % len(deployments)]


def _more_replicas(docs: list[dict]) -> None:
    _deployment_doc(docs, 1)["spec"]["replicas"] += 1


def _new_label(docs: list[dict]) -> None:
    _deployment_doc(docs, 2).setdefault("metadata", {}).setdefault("labels", {})["team-note"] = "changed"


def _engine_arg(docs: list[dict]) -> None:
    member = _deployment_doc(docs, 0)["spec"]["template"]["spec"]["engines"][0]["members"][0]
    container = member["template"]["spec"]["containers"][0]
    container.setdefault("env", []).append({"name": "MAX_NUM_SEQS", "value": "17"})


def _cluster_label(docs: list[dict]) -> None:
    next(d for d in docs if d["kind"] == "InferenceCluster").setdefault("metadata", {}).setdefault(
        "labels", {})["rack"] = "r9"


@pytest.mark.parametrize("fleet_of", [lambda: _example("kind"), lambda: _example("aws"), lambda: _example("dynamo"),
                                      lambda: _example("canary"), _benchmark_fleet],
                         ids=["kind", "aws", "dynamo", "canary", "benchmark-12"])
@pytest.mark.parametrize("mutate", [_more_replicas, _new_label, _engine_arg, _cluster_label])
@pytest.mark.parametrize("size", [1, 3])
def test_a_shard_whose_digest_is_unchanged_plans_exactly_as_before(fleet_of, mutate, size):
    """The soundness of skipping a shard's preview: over example and benchmark fleets and
    one-manifest changes, every shard whose digest did not change plans the very same
    ClusterPlans, and a change that alters a shard's plan alters its digest."""
    before = fleet_of()
    docs = copy.deepcopy(before.to_documents())
    mutate(docs)
    after = load_documents(docs)
    old_digests, old_plans = _digests_and_plans(before, size)
    new_digests, new_plans = _digests_and_plans(after, size)
    assert set(old_digests) == set(new_digests)
    for shard in new_digests:
        if new_digests[shard] == old_digests[shard]:
            assert new_plans[shard] == old_plans[shard], shard


def test_a_one_deployment_change_leaves_the_other_shards_digests_alone():
    """On the benchmark fleet, one more replica of one deployment changes few shards'
    digests (where it lands, whose routes change, the control shard), not all."""
    before = _benchmark_fleet()
    docs = copy.deepcopy(before.to_documents())
    _more_replicas(docs)
    old, _ = _digests_and_plans(before, 1)
    new, _ = _digests_and_plans(load_documents(docs), 1)
    changed = sorted(s for s in new if new[s] != old[s])
    assert "control" in changed
    assert 1 <= len(changed) <= len(new) // 2, changed


def test_a_shard_digest_ignores_the_every_manifest_digest_but_not_the_share():
    fl = full_fleet()
    share = next(iter(fleet_shares(fl, _placement(fl), shard_layout(list(fl.clusters), 1)).values())).to_json()
    digests = FleetDigests(fl)
    base = shard_digest(digests, share, control=False)
    assert shard_digest(digests, {**share, "fleetDigest": "other"}, control=False) == base
    assert shard_digest(digests, {**share, "facts": {}}, control=False) != base
    assert shard_digest(digests, share, control=True) != base
