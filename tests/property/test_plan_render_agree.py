"""Plan and render agree (issue 9 item 4), over random fleets (hypothesis).

For every generated fleet, including clusters that cannot stage a ModelCache (Existing
without `existing.cache.storageClassName`, Vultr) and deployments that use one: every
replica the scheduler places renders, with its caches and the whole cluster plan, and
every refusal the renderer would raise for a cluster is a filter reason of the
scheduler's for that cluster instead."""

from __future__ import annotations

import copy

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from modelplane.api import load_documents
from modelplane.plan import plan_fleet
from modelplane.render import RenderError, render_cache
from modelplane.scheduler import EVERY_DEPLOYMENT, FleetPlacement, candidate_clusters, place_fleet
from modelplane.storage import cache_storage_problem
from tests.manifests import cluster, deployment, gpu_class, model_cache, pool

from .fleets import REGIONS, fleets

SETTINGS = settings(max_examples=60, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
SOURCES = [{"source": "Kind"}, {"source": "Existing", "existing": {}},
           {"source": "Existing", "existing": {"cache": {"storageClassName": "nfs-rwx"}}},
           {"source": "Vultr", "vultr": {"region": "ewr"}}, {"source": "EKS", "eks": {"region": "us-east-1"}}]


@st.composite
def fleets_with_caches(draw) -> list[dict]:
    docs = copy.deepcopy(draw(fleets()))
    for doc in docs:
        if doc["kind"] == "InferenceCluster":
            doc["spec"]["cluster"] = draw(st.sampled_from(SOURCES))
    caches = [model_cache("weights"), model_cache("regional", selector={"region": draw(st.sampled_from(REGIONS))})]
    for doc in docs:
        if doc["kind"] == "ModelDeployment":
            cache = draw(st.sampled_from([None, "weights", "regional"]))
            if cache:
                doc["spec"]["template"]["spec"]["modelCacheRef"] = {"name": cache}
    return docs + caches


@SETTINGS
@given(fleets_with_caches())
def test_every_placed_replica_renders_and_every_render_refusal_is_a_scheduler_reason(docs):
    fleet = load_documents(copy.deepcopy(docs))
    placement = place_fleet(fleet, explain=EVERY_DEPLOYMENT)     # every cluster's reason, below
    plan = plan_fleet(fleet, placement)   # raises if any placed replica or cache did not render
    assert sum(len(c.replicas) for c in plan.clusters.values()) == sum(len(d.replicas) for d in placement.deployments)
    candidates = candidate_clusters(fleet)
    for dp in placement.deployments:
        dep = fleet.deployments[(dp.namespace, dp.name)]
        cache = fleet.cache_for(dep)
        if cache is None:
            continue
        for name, spec in fleet.clusters.items():
            try:
                render_cache(fleet, cache, spec)
            except RenderError:
                refused = True
            else:
                refused = False
            assert refused == (cache_storage_problem(spec) is not None)
            if not refused:
                continue
            # the scheduler never places there, and says why, as the renderer would
            assert name not in candidates[(dp.namespace, dp.name)]
            assert name not in {r.cluster for r in dp.replicas}
            for unplaced in dp.unplaced:
                assert "cannot be staged on this cluster" in unplaced.reasons[name].message or \
                    "clusterSelector does not match" in unplaced.reasons[name].message, unplaced.reasons[name]


@SETTINGS
@given(fleets_with_caches())
def test_a_kept_placement_plans_again(docs):
    fleet = load_documents(copy.deepcopy(docs))
    first = place_fleet(fleet)
    again = place_fleet(fleet, previous=FleetPlacement.from_json(first.to_json()))
    plan_fleet(fleet, again)


def test_the_generator_covers_both_sides():
    """The property above is not vacuous: fleets with refusing clusters and placed cached
    replicas are generated."""
    seen = {"refusing": 0, "cached-placed": 0}

    # Derandomized: whether 60 random fleets happen to include a placed cached replica is luck
    # (it failed about once in a few dozen runs); a fixed sequence makes the guard deterministic.
    @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True,
              database=None)
    @given(fleets_with_caches())
    def probe(docs):
        fleet = load_documents(copy.deepcopy(docs))
        placement = place_fleet(fleet)
        seen["refusing"] += any(cache_storage_problem(c) for c in fleet.clusters.values())
        seen["cached-placed"] += any(dp.replicas and fleet.cache_for(fleet.deployments[(dp.namespace, dp.name)])
                                     for dp in placement.deployments)

    probe()
    assert seen["refusing"] > 0 and seen["cached-placed"] > 0, seen


@pytest.mark.parametrize("source", [{"source": "Existing", "existing": {}},
                                    {"source": "Vultr", "vultr": {"region": "ewr"}}])
def test_the_issue_9_fleet_plans(source):
    """The fleet `pulumi preview` died on: a replica with a cache, only a cluster that can't stage it."""
    docs = [gpu_class("g"), cluster("c", pool("p", "g", 2)), model_cache("weights"),
            deployment("d", 1, cache="weights")]
    docs[1]["spec"]["cluster"] = source
    fleet = load_documents(docs)
    placement = place_fleet(fleet)
    assert placement.find("default", "d").replicas == []
    assert "cannot be staged" in placement.find("default", "d").unplaced[0].reasons["c"].message
    plan_fleet(fleet, placement)
