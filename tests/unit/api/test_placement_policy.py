"""Our placement extensions (issue 14) load, default and fail like every other field:
file, document, kind and name, field path, what is wrong and what would be right."""

import pytest

from modelplane.api import ManifestError, load_manifest_text
from tests.manifests import (
    deployment,
    fleet_budget,
    model_service,
    placement_policy,
    preferences,
    service_entry,
    spread,
    tier,
    to_yaml,
)


def service(weighting: str) -> str:
    entry = service_entry({"modelplane.ai/deployment": "chat"}, weighting)
    return to_yaml([model_service("chat", entry, namespace="ml")])


def error(text: str) -> str:
    with pytest.raises(ManifestError) as exc:
        load_manifest_text(text, "team.yaml")
    return str(exc.value)


def test_defaults() -> None:
    dep = deployment("m", 1, policy=placement_policy(spread("region"), prefs=preferences(tier("a"))))
    fleet = load_manifest_text(to_yaml([dep, fleet_budget("b", 4)]))
    (d,) = fleet.deployments.values()
    rule = d.spec.placement_policy.spread_constraints[0]
    prefs = d.spec.placement_policy.cluster_preferences
    assert (rule.min_groups, rule.max_groups, rule.max_replicas_per_group) == (1, None, None)
    assert (prefs.return_after_plans, prefs.max_moves_per_plan) == (3, 1)
    assert fleet.budgets["b"].spec.namespaces == []
    svc = next(iter(load_manifest_text(service("Capacity")).services.values()))
    assert svc.spec.endpoints[0].routing_policy.weighting == "Capacity"


def test_reference_manifests_need_none_of_it() -> None:
    (d,) = load_manifest_text(to_yaml([deployment("m", 1)])).deployments.values()
    assert d.spec.placement_policy is None


def test_round_trip_keeps_the_blocks() -> None:
    docs = [deployment("m", 1, policy=placement_policy(spread("region", 2))), fleet_budget("b", 4)]
    fleet = load_manifest_text(to_yaml(docs))
    again = load_manifest_text(to_yaml(fleet.to_documents()))
    assert again.to_documents() == fleet.to_documents()


@pytest.mark.parametrize("policy, path, words", [
    (placement_policy(spread("region", 3, 2)), "spec.placementPolicy.spreadConstraints[0]",
     "maxGroups 2 is below minGroups 3; raise maxGroups or lower minGroups"),
    (placement_policy(spread("region"), spread("region")), "spec.placementPolicy.spreadConstraints",
     "topologyKey must be unique"),
    (placement_policy(spread("not a key!")), "spec.placementPolicy.spreadConstraints[0].topologyKey",
     "is not a qualified name"),
    (placement_policy(spread("region", 0)), "spec.placementPolicy.spreadConstraints[0].minGroups",
     "greater than or equal to 1"),
    ({"spreadConstraints": [{"topologyKey": "region", "minGroups": "2"}]},
     "spec.placementPolicy.spreadConstraints[0].minGroups", "valid integer"),
    (placement_policy(prefs=preferences(tier("a"), tier("a"))), "spec.placementPolicy.clusterPreferences.tiers",
     "tier names must be unique"),
    (placement_policy(prefs=preferences()), "spec.placementPolicy.clusterPreferences.tiers", "at least 1 item"),
    (placement_policy(prefs=preferences(tier("a"), return_after=0)),
     "spec.placementPolicy.clusterPreferences.returnAfterPlans", "greater than or equal to 1"),
    (placement_policy(prefs=preferences(tier("Tier 1"))), "spec.placementPolicy.clusterPreferences.tiers[0].name",
     "is not a DNS label"),
    ({"spreadConstraint": []}, "spec.placementPolicy.spreadConstraint",
     "unknown field 'spreadConstraint'; fields allowed here: clusterPreferences, spreadConstraints"),
])
def test_invalid_policy(policy, path, words) -> None:
    text = error(to_yaml([deployment("m", 1, namespace="ml", policy=policy)]))
    assert f"team.yaml, document 0 (ModelDeployment ml/m) at {path}: " in text
    assert words in text


@pytest.mark.parametrize("budget, path, words", [
    (fleet_budget("b", -1), "spec.maxDevices", "greater than or equal to 0"),
    ({**fleet_budget("b", 1), "spec": {}}, "spec.maxDevices", "required field 'maxDevices' is missing"),
    (fleet_budget("b", 1, namespaces=["ML Team"]), "spec.namespaces", "is not a DNS label"),
    ({**fleet_budget("b", 1), "apiVersion": "modelplane.ai/v1alpha1"}, "apiVersion",
     "FleetBudget is served as 'placement.modelplane-pulumi.dev/v1alpha1'"),
    ({**fleet_budget("b", 1), "metadata": {"name": "b", "namespace": "ml"}}, "metadata.namespace",
     "cluster-scoped; remove metadata.namespace"),
])
def test_invalid_budget(budget, path, words) -> None:
    text = error(to_yaml([budget]))
    assert f"(FleetBudget b) at {path}: " in text and words in text


def test_invalid_weighting() -> None:
    text = error(service("Heavy"))
    assert "(ModelService ml/chat) at spec.endpoints[0].routingPolicy.weighting: " in text
    assert "'Even' or 'Capacity'" in text


def balanced(*entries: dict[str, object]) -> str:
    return to_yaml([model_service("chat", *entries, namespace="ml")])


def entry(name: str, balancing: str | None = None, priority: int | None = None,
          weighting: str | None = None) -> dict[str, object]:
    e = service_entry({"modelplane.ai/deployment": name}, weighting, name=name)
    if balancing is not None:
        e["routingPolicy"] = {**e.get("routingPolicy", {}), "balancing": balancing}
    if priority is not None:
        e["priority"] = priority
    return e


def test_balancing_defaults_to_round_robin_and_cache_aware_loads() -> None:
    (plain,) = load_manifest_text(balanced(entry("a"))).services.values()
    assert plain.spec.endpoints[0].balancing == "RoundRobin" and not plain.spec.cache_aware
    (svc,) = load_manifest_text(balanced(entry("a", "CacheAware"), entry("b", "CacheAware"))).services.values()
    assert svc.spec.cache_aware and svc.spec.endpoints[1].routing_policy.weighting == "Even"


@pytest.mark.parametrize(("entries", "words"), [
    pytest.param([entry("a", "Sticky")],
                 ["at spec.endpoints[0].routingPolicy.balancing: ", "'RoundRobin' or 'CacheAware'", "'Sticky'"],
                 id="unknown value"),
    pytest.param([entry("a", "CacheAware"), entry("b")],
                 ["at spec: endpoints[1].routingPolicy.balancing is RoundRobin but endpoints[0]", "on every entry"],
                 id="a mix of entries"),
    pytest.param([entry("a", "CacheAware"), entry("b", "CacheAware", priority=1)],
                 ["at spec: endpoints[1].priority is 1", "one priority tier"], id="two tiers"),
    pytest.param([entry("a", "CacheAware"), entry("b", "CacheAware", weighting="Capacity")],
                 ["at spec: endpoints[1].routingPolicy.weighting is Capacity", "weighting: Even"],
                 id="capacity weighting"),
])
def test_invalid_balancing(entries: list[dict[str, object]], words: list[str]) -> None:
    text = error(balanced(*entries))
    assert "(ModelService ml/chat)" in text
    for w in words:
        assert w in text, text
