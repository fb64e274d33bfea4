"""Failover on the data path (issue 13), driven by the fleet scheduler's placements: cluster a
goes away; during its grace period the placement keeps its replica and the gateways' health
checks drain it; after the grace period the placement adds a replacement on b (new first,
a's replica kept until a answers) and traffic flows through b's two replicas. Zero failed
requests at every step. Real Traefik and mock engines on 127.0.0.1 (kwok pods on the sim are
not routable, so the sim cannot carry this part)."""

from __future__ import annotations

import pytest

from modelplane.api import load_manifest_text
from modelplane.commands.traffic import run_split
from modelplane.gateway.fleet import fleet_routes, placement_endpoints
from modelplane.runtime.fleet import LocalSecurity
from modelplane.scheduler import FleetPlacement, Outage, place_fleet
from tests import manifests as g

from .helpers import secure, wait_only_secure

NS = "ml-team"
IN_GRACE = Outage("unreachable since 100 (connection refused)", evacuate=False, reachable=False)
PAST_GRACE = Outage("unreachable since 100 (connection refused); grace period over", evacuate=True, reachable=False)


def names(placement: FleetPlacement) -> dict[str, str]:
    return {f"{r.cluster}#{r.index}": r.name for r in placement.deployments[0].replicas}


@pytest.mark.parametrize("security", [None, LocalSecurity()], ids=["plain", "tls-keys-mtls"])
def test_a_cluster_fails_over_with_zero_failed_requests(make_fleet, security) -> None:
    fleet = make_fleet(security=security)
    auth = secure(fleet)
    docs = [g.gpu_class("gpu2", 2), g.cluster("a", g.pool("gpu", "gpu2", 1)), g.cluster("b", g.pool("gpu", "gpu2", 1)),
            g.deployment("chat", 2, g.engine("main", g.standalone(1)), namespace=NS),
            g.model_service("chat", g.service_entry({"modelplane.ai/deployment": "chat"}), namespace=NS)]
    fl = load_manifest_text(g.to_yaml(docs))

    def serve(placement: FleetPlacement) -> str:
        endpoints = fleet.start_engines(placement_endpoints(fl, placement))
        fleet.apply_routes(fleet_routes(fl, endpoints), endpoints)
        return fleet.service_url(NS, "chat")

    before = place_fleet(fl)
    at = names(before)
    assert sorted(at) == ["a#0", "b#0"]
    url = serve(before)
    res = run_split(url, 40, **auth)
    assert (res.failed, res.by_replica) == (0, {at["a#0"]: 20, at["b#0"]: 20})

    fleet.take_offline("a")
    # within the grace period the placement does not change; the health checks drain a
    grace = place_fleet(fl, g.previous_from(before, [at["a#0"]]), outages={"a": IN_GRACE})
    assert names(grace) == at
    url = serve(grace)
    wait_only_secure(fleet, url, at["b#0"])
    res = run_split(url, 40, **auth)
    assert (res.failed, res.by_replica) == (0, {at["b#0"]: 40})

    # past it: a replacement on b, a's replica kept (its cluster cannot be asked to delete it)
    after = place_fleet(fl, g.previous_from(grace, [at["a#0"]]), outages={"a": PAST_GRACE})
    now = names(after)
    assert sorted(now) == ["a#0", "b#0", "b#1"]
    assert [(f.from_, f.to) for f in after.deployments[0].failover] == [(at["a#0"], now["b#1"])]
    url = serve(after)
    res = run_split(url, 60, **auth)
    assert res.failed == 0
    assert set(res.by_replica) == {now["b#0"], now["b#1"]} and min(res.by_replica.values()) >= 20
