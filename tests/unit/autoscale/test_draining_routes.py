"""The rule the Pulumi stacks and the local loop share, on a placement: a draining replica's
objects stay (ScalingState.with_draining) and its routes go (modelplane.gateway.fleet.leaving_routes:
none at the control plane; at its workload gateway only while it is that cluster's last replica
of the service)."""

from __future__ import annotations

import pytest

from modelplane.api import load_manifest_text
from modelplane.autoscale.state import Draining, ScalingState
from modelplane.gateway.fleet import fleet_routes, leaving_routes, placement_endpoints
from modelplane.scheduler import FleetPlacement, place_fleet
from tests.manifests import cluster, deployment, gpu_class, model_service, pool, service_entry, to_yaml

NS = "ml-team"


def url(_ns: str, replica: str, _cluster: str) -> str:
    return f"http://{replica}"


@pytest.mark.parametrize("west_replicas", [1, 2])
def test_a_draining_replica_runs_and_is_routed_only_where_it_is_the_last(west_replicas: int) -> None:
    f = load_manifest_text(to_yaml([gpu_class("g1", 1), cluster("east", pool("gpu", "g1", 2)),
                                    cluster("west", pool("gpu", "g1", 2)),
                                    deployment("chat", 2 + west_replicas, namespace=NS),
                                    model_service("chat", service_entry({"modelplane.ai/deployment": "chat"}),
                                                  namespace=NS)]))
    dep = place_fleet(f).find(NS, "chat")
    west = sorted((r for r in dep.replicas if r.cluster == "west"), key=lambda r: r.index)
    assert len(west) == west_replicas
    leaving = west[-1]
    kept = FleetPlacement.from_json({"deployments": [{**dep.to_json(), "desired": len(dep.replicas) - 1,
                                                      "replicas": [r.to_json() for r in dep.replicas
                                                                   if r.name != leaving.name]}]})
    state = ScalingState(draining=(Draining(NS, "chat", leaving, 0.0),))
    applied = state.with_draining(kept)
    assert sorted(r.name for r in applied.find(NS, "chat").replicas) == sorted(r.name for r in dep.replicas)
    serving, local = leaving_routes(f, placement_endpoints(f, applied, url), {d.key for d in state.draining})
    assert leaving.name not in {b.endpoint.name for b in serving[0].backends}
    assert serving == fleet_routes(f, placement_endpoints(f, kept, url))     # as if it were gone
    in_workload = leaving.name in {b.endpoint.name for b in local[0].backends}
    assert in_workload == (west_replicas == 1)
    assert ScalingState().with_draining(kept) is kept
