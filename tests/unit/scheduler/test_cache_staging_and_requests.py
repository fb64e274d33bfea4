"""Plan and render agree (issue 9 item 4): a cluster that cannot stage a replica's
ModelCache is filtered out by the scheduler with the renderer's reason; and the placement
records the device requests each member resolved (issue 10 item 2), re-resolving kept
replicas of a placement written before it did."""

from __future__ import annotations

import json

from modelplane.plan import plan_fleet
from modelplane.render import render_replica
from modelplane.scheduler import FleetPlacement, ResolvedRequest, candidate_clusters, place_fleet
from modelplane.storage import cache_storage_problem

from .helpers import cluster, deployment, engine, gpu_class, load, mem_at_least, model_cache, pool, prev, standalone


def _existing(name: str, storage: str | None) -> dict:
    doc = cluster(name, pool("p", "h100", 2))
    existing = {"cache": {"storageClassName": storage}} if storage else {}
    doc["spec"]["cluster"] = {"source": "Existing", "existing": existing}
    return doc


FLEET = [gpu_class("h100"), _existing("a-nostore", None), _existing("b-nfs", "nfs-rwx"),
         model_cache("qwen"), deployment("chat", 2, cache="qwen"), deployment("free", 2)]


def test_a_cluster_that_cannot_stage_the_cache_is_filtered_out_with_the_renderers_reason():
    fleet = load(FLEET)
    placement = place_fleet(fleet)
    chat = placement.find("default", "chat")
    assert [r.cluster for r in chat.replicas] == ["b-nfs", "b-nfs"]
    # without a cache the same cluster is fine
    assert "a-nostore" in {r.cluster for r in placement.find("default", "free").replicas}
    assert candidate_clusters(fleet)[("default", "chat")] == ["b-nfs"]
    # and everything placed renders (the Pulumi preview of issue 9 died here)
    plan_fleet(fleet, placement)


def test_the_reason_names_the_fix():
    fleet = load([gpu_class("h100"), _existing("a-nostore", None), model_cache("qwen"),
                  deployment("chat", 1, cache="qwen")])
    chat = place_fleet(fleet).find("default", "chat")
    assert chat.replicas == [] and chat.conditions[0].reason == "NoClusters"
    why = chat.unplaced[0].reasons["a-nostore"].message
    assert why.startswith("a ModelCache cannot be staged on this cluster: ")
    assert cache_storage_problem(fleet.clusters["a-nostore"]) in why
    assert "spec.cluster.existing.cache.storageClassName" in why


def test_a_kept_replica_on_a_cluster_that_cannot_stage_its_cache_moves():
    fleet = load(FLEET)
    old = prev(("chat", "a-nostore", 0, {"main": "p"}), ("chat", "b-nfs", 0, {"main": "p"}))
    chat = place_fleet(fleet, previous=old).find("default", "chat")
    assert sorted((r.cluster, r.index) for r in chat.replicas) == [("b-nfs", 0), ("b-nfs", 1)]
    assert any("cannot be staged" in why.message for _, why in chat.dropped)


def test_the_placement_records_each_members_resolved_requests():
    fleet = load([gpu_class("h100", 8), cluster("c", pool("p", "h100", 1)),
                  deployment("m", 1, engine("main", standalone(gpus=2, min_gib=40)))])
    rep = place_fleet(fleet).find("default", "m").replicas[0]
    assert rep.engines["main"].requests == ((ResolvedRequest("gpu", "gpu.nvidia.com", 2, (mem_at_least(40),)),),)
    doc = json.loads(json.dumps(place_fleet(fleet).to_json()))
    assert doc["deployments"][0]["replicas"][0]["engines"]["main"]["requests"] == [[
        {"name": "gpu", "deviceClassName": "gpu.nvidia.com", "count": 2, "selectors": [mem_at_least(40)]}]]
    assert FleetPlacement.from_json(doc).find("default", "m").replicas[0] == rep


def test_a_previous_placement_without_requests_is_re_resolved():
    fleet = load([gpu_class("h100", 8), cluster("c", pool("p", "h100", 1)),
                  deployment("m", 1, engine("main", standalone(gpus=2)))])
    doc = place_fleet(fleet).to_json()
    for d in doc["deployments"]:
        for r in d["replicas"]:
            for e in r["engines"].values():
                del e["requests"]
    old = FleetPlacement.from_json(doc)
    assert old.find("default", "m").replicas[0].engines["main"].requests == ()
    again = place_fleet(fleet, previous=old)
    rep = again.find("default", "m").replicas[0]
    assert rep.name == old.find("default", "m").replicas[0].name
    assert rep.engines["main"].requests[0][0].count == 2
    render_replica(fleet, fleet.deployments[("default", "m")], rep, "c")


def test_the_filter_runs_once_per_cluster_and_selector_whatever_the_caches(monkeypatch):
    """Issue 31 item 2: keyed by the cache's name, the filter re-ran over every cluster for each
    ModelCache (8.6x the work on a 3x fleet); its answer depends on the cache's selector and the
    cluster only."""
    from modelplane.scheduler.plugins import cache_staging

    calls: list[str] = []
    real = cache_staging.CacheStaging.filter

    def counted(self, cluster):
        calls.append(cluster.name)
        return real(self, cluster)

    monkeypatch.setattr(cache_staging.CacheStaging, "filter", counted)
    clusters = [_existing(f"c-{i}", "nfs-rwx" if i % 2 else None) for i in range(10)]
    caches = [model_cache(f"model-{i}") for i in range(20)]
    deployments = [deployment(f"d-{i}", 1, cache=f"model-{i}") for i in range(20)]
    placement = place_fleet(load([gpu_class("h100"), *clusters, *caches, *deployments]))
    assert sorted(calls) == sorted(f"c-{i}" for i in range(10))
    assert all(r.cluster in {"c-1", "c-3", "c-5", "c-7", "c-9"} for d in placement.deployments for r in d.replicas)
