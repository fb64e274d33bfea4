"""The placement provider with an `observe` input, called the way the engine calls it: check()
reads the clusters (here: readings injected in place of the network), places against what is
free, records capacity and health, and with the check's time as an input fails a cluster over
after its grace period. No engine."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import modelplane.observe.read as read
from modelplane.api import load_documents
from modelplane.naming import claim_template_name
from modelplane.observe.objects import claim_devices
from modelplane.observe.read import ClusterRead, Unreachable
from providers.placement import PlacementProvider, compute_placement, normalize_numbers
from tests import manifests as g
from tests.pulumi.test_placement_provider import as_engine_state, where
from tests.unit.observe.objects import claim, cluster_objects, our_pod, slice_devices

GRACE = 60


def documents() -> list[dict[str, Any]]:
    cls = g.inference_class("h100x8", g.device("gpu", 8, "81559Mi"))
    return [cls, g.cluster("a", g.pool("gpu", "h100x8", 1)), g.cluster("b", g.pool("gpu", "h100x8", 1)),
            g.deployment("chat", 2, g.engine("main", g.standalone(4)))]


def news() -> dict[str, Any]:
    return {"fleet": documents(), "accounting": "Device", "__provider": "opaque",
            "observe": {"kubeconfigs": {"a": "/k/a", "b": "/k/b"}, "timeoutSeconds": 2,
                        "unreachableGraceSeconds": GRACE, "unreadyGraceSeconds": 600}}


class Clusters:
    """What each cluster answers at the next check."""

    def __init__(self) -> None:
        fleet = load_documents(documents())
        self.objects = {c: cluster_objects(fleet, c) for c in ("a", "b")}
        self.claims: dict[str, list[dict[str, Any]]] = {"a": [], "b": []}
        self.foreign: dict[str, list[dict[str, Any]]] = {"a": [], "b": []}
        self.pods: dict[str, list[dict[str, Any]]] = {"a": [], "b": []}
        self.down: set[str] = set()
        self.calls: list[dict[str, str]] = []

    def read(self, kubeconfigs: dict[str, str], timeout: float, contexts: Any = None) -> dict[str, Any]:
        self.calls.append(dict(kubeconfigs))
        return {c: Unreachable(c, "connection refused") if c in self.down
                else ClusterRead(c, *self.objects[c], self.foreign[c] + self.claims[c], self.pods[c])
                for c in kubeconfigs}

    def apply(self, state: dict[str, Any]) -> None:
        """What `up` and the in-cluster scheduler make of a placement on the reachable clusters:
        one Running, Ready pod per replica with a claim on the pool's node (a stand-in for the sim)."""
        for c in self.objects:
            if c in self.down:
                continue
            nodes, slices = self.objects[c]
            node = nodes[0]["metadata"]["name"]
            free = [d for d in slice_devices(slices, node)
                    if all(d not in claim_devices(x) for x in self.foreign[c])]
            self.pods[c], self.claims[c] = [], []
            for dep in state["placement"]["deployments"]:
                for rep in dep["replicas"]:
                    if rep["cluster"] != c:
                        continue
                    name = f"{rep['name']}-0"
                    self.pods[c].append(our_pod(dep["namespace"], name, dep["name"], c, rep["index"], node=node,
                                                template=claim_template_name(rep["name"], "main", "Standalone"),
                                                claim_name=f"{name}-claim"))
                    self.claims[c].append(claim(dep["namespace"], f"{name}-claim", free[:4], owner_pod=name))
                    free = free[4:]


@pytest.fixture
def clusters(monkeypatch: pytest.MonkeyPatch) -> Iterator[Clusters]:
    fake = Clusters()
    monkeypatch.setattr(read, "read_clusters", fake.read)
    yield fake


def check(olds: dict[str, Any], now: float) -> dict[str, Any]:
    """PlacementProvider.check at time `now` (it normalizes the engine's numbers first, too)."""
    outputs, failures = compute_placement(normalize_numbers(olds), news(), now)
    assert not failures, [f.reason for f in failures]
    return {**news(), **(outputs or {})}


def state_of(checked: dict[str, Any]) -> dict[str, Any]:
    """What the engine hands diff() as olds: the outputs create() wrote, not the checked inputs."""
    return as_engine_state(PlacementProvider().create(checked).outs)


def test_a_foreign_claim_on_a_cluster_is_placed_around_and_recorded(clusters: Clusters) -> None:
    nodes, slices = clusters.objects["a"]
    clusters.foreign["a"] = [claim("t", "theirs", slice_devices(slices, nodes[0]["metadata"]["name"])[:8])]
    out = check({}, now=1000)
    assert clusters.calls == [{"a": "/k/a", "b": "/k/b"}]
    assert where(out) == {"default/chat": [("b", 0), ("b", 1)]}
    assert out["capacity"]["a"]["pools"]["gpu"]["held"] == 8
    assert out["health"] == {}


def test_unchanged_clusters_give_the_same_state_and_no_diff(clusters: Clusters) -> None:
    first = check({}, now=1000)
    clusters.apply(first)
    second = check(as_engine_state(first), now=5000)
    assert second == first
    diff = PlacementProvider().diff("id", state_of(first), second)
    assert diff.changes is False


def test_an_unreachable_cluster_is_kept_through_its_grace_and_replaced_after(clusters: Clusters) -> None:
    first = check({}, now=1000)
    clusters.apply(first)
    assert where(first) == {"default/chat": [("a", 0), ("b", 0)]}
    clusters.down = {"a"}
    t0 = check(as_engine_state(first), now=2000)
    assert where(t0) == where(first)                                  # kept during the grace period
    assert t0["health"] == {"a": {"condition": "Unreachable", "since": 2000, "reason": "connection refused"}}
    assert t0["capacity"]["a"] == {"source": "declared", "reason": "unreachable: connection refused"}
    assert PlacementProvider().diff("id", state_of(first), t0).changes is True   # the clusters changed
    t1 = check(as_engine_state(t0), now=2000 + GRACE - 1)
    assert t1 == t0
    t2 = check(as_engine_state(t1), now=2000 + GRACE)
    clusters.apply(t2)
    chat = t2["placement"]["deployments"][0]
    assert where(t2) == {"default/chat": [("a", 0), ("b", 0), ("b", 1)]}   # new first
    assert [f["cluster"] for f in chat["failover"]] == ["a"]
    assert next(r for r in chat["replicas"] if r["cluster"] == "a")["ready"] is False
    # back: the replacement is ready, so the old replica leaves; then nothing moves
    clusters.down = set()
    t3 = check(as_engine_state(t2), now=2000 + GRACE + 30)
    assert where(t3) == {"default/chat": [("b", 0), ("b", 1)]} and t3["health"] == {}
    states = [t3]
    for i in range(10):
        clusters.apply(states[-1])
        states.append(check(as_engine_state(states[-1]), now=3000 + 60 * i))
    assert all(where(s) == where(t3) for s in states)


def test_invalid_observe_settings_are_a_check_failure(clusters: Clusters) -> None:
    bad = {**news(), "observe": {"kubeconfigs": {"a": "/k/a"}, "timeoutSeconds": 0}}
    _, failures = compute_placement({}, bad, 1.0)
    assert [f.property for f in failures] == ["observe"] and "timeoutSeconds" in failures[0].reason


# What a hand-edited or corrupted state hands check() as olds (JSON's 1e999 reads as inf).
HOSTILE_PLACEMENTS = {
    "budget-maxDevices-inf": ({"deployments": [], "budgets": [{"name": "b", "maxDevices": float("inf")}]},
                              "$.budgets[0].maxDevices: expected an integer, got a number"),
    "spread-groups-inf": ({"deployments": [{"namespace": "default", "name": "chat", "replicas": [
        {"name": "chat-1", "index": 0, "cluster": "a", "engines": {"main": {"pool": "gpu"}}}],
        "placementPolicy": {"spread": [{"topologyKey": "region", "groups": {"us": float("inf")}}]}}]},
        "$.deployments[0].placementPolicy.spread[0].groups.us: expected an integer, got a number"),
    "index-70-digits": ({"deployments": [{"namespace": "default", "name": "chat", "replicas": [
        {"name": "chat-1", "index": 10**70, "cluster": "a", "engines": {"main": {"pool": "gpu"}}}]}]},
        "$.deployments[0].replicas[0].index: expected a whole number from 0 to 10000"),
    "deployments-a-string": ({"deployments": "nope"}, "$.deployments"),
}


@pytest.mark.parametrize("name", sorted(HOSTILE_PLACEMENTS))
def test_a_hostile_previous_placement_in_the_state_fails_the_check_naming_the_field(
        clusters: Clusters, name: str) -> None:
    """The state's `placement` is `--previous` for check(): numbers out of range (OverflowError
    from plan and render once) fail the check on `placement` with the field's path, never a
    traceback; nothing is placed from scratch over it (that would move healthy replicas)."""
    placement, words = HOSTILE_PLACEMENTS[name]
    outputs, failures = compute_placement({"placement": placement}, news(), 1.0)
    assert not outputs and [f.property for f in failures] == ["placement"], failures
    assert words in failures[0].reason and "Traceback" not in failures[0].reason


@pytest.mark.parametrize("health", [
    ["a"], "Unreachable", {"a": {"condition": "Unreachable", "since": float("inf"), "reason": ""}},
    {"a": {"condition": "Unreachable", "since": 1e300, "reason": ""}},
    {"a": {"condition": "Unreachable", "since": -1e17, "reason": ""}},
], ids=["list", "string", "since-inf", "since-1e300", "since-negative"])
def test_an_unreadable_health_record_restarts_the_grace_periods_and_moves_nothing(
        clusters: Clusters, health: Any) -> None:
    """`health` as a list or string, or `since` infinite, far future or far past: the check
    places (the record only restarts the grace clocks) and no replica leaves a cluster that
    answers, where `since: -1e17` once read as "down for ever" would have moved them all."""
    first = check({}, now=1000)
    clusters.apply(first)
    again = check({**as_engine_state(first), "health": health}, now=1010)
    assert where(again) == where(first)
    assert again["health"] == {} or all(h["condition"] != "Unreachable" for h in again["health"].values())
