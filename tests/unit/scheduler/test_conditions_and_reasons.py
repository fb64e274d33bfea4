"""ReplicasScheduled conditions, per-cluster explanations, and cluster selection
(deployment selector AND ModelCache selector)."""

import pytest

from modelplane.scheduler.reasons import messages

from .helpers import H100, cluster, deployment, engine, gpu_class, model_cache, of, plan, pool, standalone, taint, where

US = {"modelplane.ai/region": "us"}
EU = {"modelplane.ai/region": "eu"}


def regions(us_nodes: int = 1, eu_nodes: int = 1) -> list[dict]:
    return [H100, cluster("eu", pool("gpu", "h100", eu_nodes), labels=EU),
            cluster("us", pool("gpu", "h100", us_nodes), labels=US)]


@pytest.mark.parametrize("replicas,nodes,status,reason,message", [
    (2, 1, "True", "ReplicasCreated", "Scheduled 2 of 2 replicas"),
    (3, 1, "False", "PartialCapacity", "Scheduled 2 of 3 replicas"),
    (1, 0, "False", "InsufficientCapacity", "0 of 1 replicas scheduled (checked 2 clusters)"),
    (0, 1, "True", "ScaledToZero", "replicas is 0: deployment parked"),
])
def test_replicas_scheduled(replicas, nodes, status, reason, message) -> None:
    fp = plan([*regions(nodes, nodes), deployment("m", replicas)])
    c = of(fp, "m").conditions[0]
    assert (c.type, c.status, c.reason, c.message) == ("ReplicasScheduled", status, reason, message)


def test_scaled_to_zero_removes_every_replica() -> None:
    first = plan([*regions(), deployment("m", 2)])
    fp = plan([*regions(), deployment("m", 0)], previous=first)
    assert where(fp, "m") == [] and of(fp, "m").unplaced == []
    assert sorted(why.message for _, why in of(fp, "m").dropped) == ["scaled down", "scaled down"]


def test_no_clusters_when_selectors_match_nothing() -> None:
    fp = plan([*regions(), deployment("m", 1, selector={"modelplane.ai/region": "ap"})])
    dp = of(fp, "m")
    assert (dp.conditions[0].status, dp.conditions[0].reason) == ("False", "NoClusters")
    assert messages(dp.unplaced[0].reasons) == {
        "eu": "clusterSelector does not match: needs modelplane.ai/region=ap, cluster has modelplane.ai/region=eu",
        "us": "clusterSelector does not match: needs modelplane.ai/region=ap, cluster has modelplane.ai/region=us",
    }


def test_cache_selector_intersects_the_deployment_selector() -> None:
    # Divergence: the reference dict-merges (the cache's region=eu would win).
    fp = plan([*regions(), model_cache("qwen", selector=EU), deployment("m", 1, selector=US, cache="qwen")])
    dp = of(fp, "m")
    assert dp.conditions[0].reason == "NoClusters"
    assert dp.unplaced[0].reasons["eu"].message.startswith("clusterSelector does not match")
    assert dp.unplaced[0].reasons["us"].message == (
        "the ModelCache's clusterSelector does not match: needs modelplane.ai/region=eu, "
        "cluster has modelplane.ai/region=us")


def test_cache_selector_narrows_candidates() -> None:
    fp = plan([*regions(), model_cache("qwen", selector=US), deployment("m", 2, cache="qwen")])
    assert where(fp, "m") == ["us#0"]
    assert of(fp, "m").conditions[0].reason == "PartialCapacity"


def test_narrowing_the_selector_moves_replicas() -> None:
    first = plan([*regions(), deployment("m", 1)])
    assert where(first, "m") == ["eu#0"]
    fp = plan([*regions(), deployment("m", 1, selector=US)], previous=first)
    assert where(fp, "m") == ["us#0"]


def test_every_cluster_gets_its_first_reason() -> None:
    docs = [H100, gpu_class("l4", 1, "23034Mi"),
            cluster("a-other-region", pool("gpu", "h100", 5), labels=EU),
            cluster("b-tainted", pool("gpu", "h100", 5), labels=US, taints=[taint("maint")]),
            cluster("c-small-gpus", pool("l4", "l4", 5), labels=US),
            cluster("d-full", pool("gpu", "h100", 1), labels=US),
            cluster("e-no-pools", labels=US),
            deployment("m", 3, engine("main", standalone(gpus=1)), selector=US)]
    for accounting, unit in (("Node", "node"), ("Device", "device")):
        fp = plan(docs, accounting=accounting)
        dp = of(fp, "m")
        assert where(fp, "m") == ["d-full#0"]
        assert [u.index for u in dp.unplaced] == [1, 2]
        assert messages(dp.unplaced[0].reasons) == {
            "a-other-region": "clusterSelector does not match: needs modelplane.ai/region=us, "
                              "cluster has modelplane.ai/region=eu",
            "b-tainted": "untolerated taint maint:NoSchedule",
            "c-small-gpus": "no pool for engine main: pool l4: member 0 (Standalone) request "
                            "'gpu' matched no device",
            "d-full": f"engine main: short by 1 {unit} in pool gpu",
            "e-no-pools": "no pool for engine main: the cluster publishes no pools",
        }


def test_too_few_devices_is_explained() -> None:
    fp = plan([H100, cluster("a", pool("gpu", "h100", 2)),
               deployment("m", 1, engine("main", standalone(gpus=4)))])
    assert of(fp, "m").unplaced[0].reasons["a"].message == (
        "no pool for engine main: pool gpu: member 0 (Standalone) request 'gpu' matched too few "
        "devices (needs 4, gpu has 1 of 1 per node left)")


def test_caches_with_one_selector_share_the_filters_answer_and_its_words_name_no_cache() -> None:
    """The answer depends on the selector, not on which cache (issue 31: keyed by the cache's
    name the filter ran over every cluster once per cache): words naming a cache would name
    the wrong one for the other deployment."""
    fp = plan([*regions(), model_cache("alpha", selector=EU), model_cache("beta", selector=EU),
               deployment("a", 1, selector=US, cache="alpha"), deployment("b", 1, selector=US, cache="beta")])
    a, b = of(fp, "a").unplaced[0].reasons["us"], of(fp, "b").unplaced[0].reasons["us"]
    assert a is b and a.message.startswith("the ModelCache's clusterSelector does not match: ")
    assert "alpha" not in a.message and "beta" not in a.message
