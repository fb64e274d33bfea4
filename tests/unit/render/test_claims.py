"""Claims are what the scheduler resolved and recorded in the placement; a placement it
would never make is loud."""

import dataclasses

import pytest

from modelplane.render import RenderError, render_replica
from modelplane.scheduler import ResolvedRequest, resolve_member_requests

from .fleets import by_kind, full_fleet, place


def test_member_that_does_not_match_its_pool_is_never_resolved():
    fl = full_fleet()
    dep = fl.deployments[("ml-team", "chat")]
    # chat asks for gpu.example.com memory; the h100 pool's class publishes gpu.nvidia.com
    with pytest.raises(KeyError, match="h100"):
        resolve_member_requests(fl, dep, "vllm", 0, fl.clusters["eks-g"].pool("h100").class_name)
    # so such a replica carries no resolved requests, which the renderer refuses
    rep = place(fl, "ml-team", "chat", "eks-g", pools={"vllm": ("h100",)})
    with pytest.raises(RenderError, match="no resolved device requests for engine 'vllm'"):
        render_replica(fl, dep, rep, "eks-g")


def test_claim_templates_carry_the_recorded_requests_without_asking_the_scheduler(monkeypatch):
    import modelplane.scheduler as scheduler

    fl = full_fleet()
    dep = fl.deployments[("ml-team", "chat")]
    rep = place(fl, "ml-team", "chat", "kind-a")
    recorded = ResolvedRequest("gpu", "recorded.example.com", 2, ("true",))
    engines = {e: dataclasses.replace(p, requests=((recorded,),)) for e, p in rep.engines.items()}

    def refuse(*_a, **_k):
        raise AssertionError("renderers must not call the scheduler")

    monkeypatch.setattr(scheduler, "resolve_member_requests", refuse)
    (rct,) = by_kind(render_replica(fl, dep, dataclasses.replace(rep, engines=engines), "kind-a"),
                     "ResourceClaimTemplate")
    assert rct["spec"]["spec"]["devices"]["requests"] == [
        {"name": "gpu", "exactly": {"deviceClassName": "recorded.example.com", "count": 2,
                                    "selectors": [{"cel": {"expression": "true"}}]}}]


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
