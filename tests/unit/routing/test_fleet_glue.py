"""Manifests -> placement -> endpoints -> routes, with the real API loader and scheduler."""
from pathlib import Path

from modelplane.api import load_manifest_text, load_manifests
from modelplane.gateway.fleet import fleet_routes, placement_endpoints
from modelplane.routing import Credential, endpoint_from_api, service_weights
from modelplane.scheduler import place_fleet

ROOT = Path(__file__).resolve().parents[3]


def test_kind_example_routes_90_10_across_two_regions():
    fleet = load_manifests(ROOT / "examples" / "kind")
    endpoints = placement_endpoints(fleet, place_fleet(fleet))
    assert {ep.deployment for ep in endpoints} == {"chat", "chat-canary"}
    assert len({ep.cluster for ep in endpoints}) == 2  # spread
    (route,) = fleet_routes(fleet, endpoints)
    assert (route.namespace, route.name) == ("ml-team", "chat")
    assert sorted((b.entry, b.weight) for b in route.backends) == [("canary", 1), ("stable", 9)]


EXTERNAL = """
apiVersion: modelplane.ai/v1alpha1
kind: ModelEndpoint
metadata: {name: together, namespace: ml-team, labels: {tier: saas}}
spec:
  origin: https://api.together.xyz
  api: {schema: OpenAI, prefix: /openai/v1}
  credentialRef: {name: together-key}
---
apiVersion: modelplane.ai/v1alpha1
kind: ModelEndpoint
metadata: {name: legacy, namespace: ml-team, labels: {tier: saas}}
spec:
  url: https://api.example.com/
  rewritePath: /
---
apiVersion: modelplane.ai/v1alpha1
kind: ModelService
metadata: {name: chat, namespace: ml-team}
spec:
  endpoints:
  - name: overflow
    weight: 3
    selector: {matchLabels: {tier: saas}}
"""


def test_hand_written_endpoints_both_forms():
    fleet = load_manifest_text(EXTERNAL)
    eps = {e.metadata.name: endpoint_from_api(e) for e in fleet.endpoints.values()}
    new, old = eps["together"], eps["legacy"]
    assert (new.url, new.api_prefix, new.credential) == (
        "https://api.together.xyz", "/openai/v1", Credential("together-key", "apiKey"))
    assert (old.url, old.api_prefix, old.credential) == ("https://api.example.com", "/v1", None)
    assert new.external and new.cluster is None
    svc = fleet.services[("ml-team", "chat")]
    assert [(b.endpoint.name, b.weight) for b in service_weights(svc, eps.values())] == [
        ("legacy", 2), ("together", 1)]  # weight 3 over 2: remainder to the first


def test_credential_shapes_all_resolve_to_the_secret_reference():
    from types import SimpleNamespace as NS

    ref = NS(name="k", key="token")
    meta = NS(namespace="ml", name="p", labels={})
    for spec in (
        NS(origin="https://x.example", api=None, credential=NS(api_key=NS(secret_ref=ref))),
        NS(origin="https://x.example", api=None, credential_ref=ref),
        NS(origin="https://x.example", api=None, credential=ref, credential_ref=ref),  # pre-reduced
    ):
        assert endpoint_from_api(NS(metadata=meta, spec=spec)).credential == Credential("k", "token")


def test_replicas_on_clusters_without_a_gateway_take_no_share():
    fleet = load_manifests(ROOT / "examples" / "kind")
    endpoints = placement_endpoints(fleet, place_fleet(fleet))
    canary_cluster = next(ep.cluster for ep in endpoints if ep.deployment == "chat-canary")
    stable_cluster = next(ep.cluster for ep in endpoints if ep.deployment == "chat")
    (route,) = fleet_routes(fleet, endpoints, reachable_clusters=[stable_cluster])
    assert [(b.entry, b.weight) for b in route.backends] == [("stable", 1)]
    assert canary_cluster != stable_cluster


def test_control_plane_refuses_a_cluster_without_gateway_url():
    import pytest

    from modelplane.gateway.config import control_plane_config

    fleet = load_manifests(ROOT / "examples" / "kind")
    routes = fleet_routes(fleet, placement_endpoints(fleet, place_fleet(fleet)))
    with pytest.raises(ValueError, match="no gateway URL for cluster"):
        control_plane_config(routes, {})
