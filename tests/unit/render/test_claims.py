"""Claims come from the scheduler's own matching; a placement it would never make is loud."""

import pytest

from modelplane.render import RenderError, render_replica

from .fleets import full_fleet, place


def test_member_that_does_not_match_its_pool_is_an_error():
    fl = full_fleet()
    # chat asks for gpu.example.com memory; the h100 pool's class publishes gpu.nvidia.com
    rep = place(fl, "ml-team", "chat", "eks-g", pools={"vllm": ("h100",)})
    with pytest.raises(RenderError, match="h100"):
        render_replica(fl, fl.deployments[("ml-team", "chat")], rep, "eks-g")


def test_pool_the_cluster_does_not_declare_is_an_error():
    fl = full_fleet()
    rep = place(fl, "ml-team", "chat", "kind-a", pools={"vllm": ("nope",)})
    with pytest.raises(RenderError, match="nope"):
        render_replica(fl, fl.deployments[("ml-team", "chat")], rep, "kind-a")


def test_replica_rendered_for_another_cluster_is_an_error():
    fl = full_fleet()
    rep = place(fl, "ml-team", "chat", "kind-a")
    with pytest.raises(RenderError, match="kind-a"):
        render_replica(fl, fl.deployments[("ml-team", "chat")], rep, "gke-c")


def test_missing_engine_placement_is_an_error():
    fl = full_fleet()
    rep = place(fl, "ml-team", "pd", "kind-a")
    partial = type(rep)(rep.name, rep.index, rep.cluster, {"decode": rep.engines["decode"]})
    with pytest.raises(RenderError, match="prefill"):
        render_replica(fl, fl.deployments[("ml-team", "pd")], partial, "kind-a")


def test_cached_replica_on_a_cluster_without_cache_storage_is_an_error():
    fl = full_fleet()
    rep = place(fl, "ml-team", "chat", "vultr-f")
    with pytest.raises(RenderError, match="vultr-f"):
        render_replica(fl, fl.deployments[("ml-team", "chat")], rep, "vultr-f")
