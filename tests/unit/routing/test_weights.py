"""Weights per reference §4.3, including the cases the reference pins in its tests."""
import pytest

from modelplane.routing import (
    CLUSTER_LABEL,
    DEPLOYMENT_LABEL,
    Endpoint,
    RouteEntry,
    active_tier,
    cluster_weights,
    compute_weights,
    replica_endpoint,
)


def eps(dep: str, n: int, cluster: str = "c1", ready: bool = True) -> list[Endpoint]:
    return [replica_endpoint("ml", f"{dep}-{i}", dep, cluster, i, ready=ready) for i in range(n)]


def entry(dep: str, weight: int = 1, priority: int = 0, **extra: str) -> RouteEntry:
    return RouteEntry(dep, weight, {DEPLOYMENT_LABEL: dep, **extra}, priority)


def ws(backends):
    return [b.weight for b in backends]


@pytest.mark.parametrize(
    "spec, expected",
    [
        ([(80, 3), (20, 1)], [27, 27, 26, 20]),
        ([(1, 2), (3, 1)], [1, 1, 6]),
        ([(2, 1), (2, 1)], [1, 1]),
        ([(1_000_000, 1), (1, 2)], [1_000_000, 1, 1]),
        ([(1, 5)], [1, 1, 1, 1, 1]),
        ([(1, 3), (1, 2)], [1, 1, 1, 2, 1]),
        ([(90, 1), (10, 1)], [9, 1]),
    ],
)
def test_reference_examples(spec, expected):
    entries, endpoints = [], []
    for i, (w, n) in enumerate(spec):
        entries.append(entry(f"d{i}", w))
        endpoints += eps(f"d{i}", n)
    assert ws(compute_weights(entries, endpoints)) == expected


def test_entry_with_no_ready_endpoint_takes_no_share():
    endpoints = eps("a", 1) + eps("b", 2, ready=False)
    out = compute_weights([entry("a", 90), entry("b", 10)], endpoints)
    assert [(b.entry, b.weight) for b in out] == [("a", 1)]


def test_entry_matching_nothing_is_dropped():
    out = compute_weights([entry("a", 3), entry("zzz", 5)], eps("a", 2))
    assert ws(out) == [2, 1]  # 3 over 2 endpoints: remainder to the first


def test_first_matching_entry_owns_endpoint_even_when_not_ready():
    endpoints = eps("a", 1, ready=False)
    broad = RouteEntry("all", 1, {})
    out = compute_weights([entry("a"), broad], endpoints)
    assert out == []


def test_cluster_pin_selects_by_cluster_label():
    endpoints = eps("a", 1, "x") + [replica_endpoint("ml", "a-9", "a", "y", 1)]
    pinned = compute_weights([entry("a", **{CLUSTER_LABEL: "x"})], endpoints)
    assert [b.endpoint.name for b in pinned] == ["a-0"]
    both = compute_weights([entry("a")], endpoints)
    assert cluster_weights(both) == {"x": 1, "y": 1}


def test_namespace_restricts_selection():
    other = Endpoint("other", "z", {DEPLOYMENT_LABEL: "a"})
    out = compute_weights([entry("a")], eps("a", 1) + [other], namespace="ml")
    assert [b.endpoint.namespace for b in out] == ["ml"]


def test_priority_tiers_are_weighted_separately():
    endpoints = eps("a", 2) + eps("b", 1)
    out = compute_weights([entry("a", 5, priority=0), entry("b", 7, priority=1)], endpoints)
    assert [(b.priority, b.weight) for b in out] == [(0, 3), (0, 2), (1, 1)]
    assert [b.entry for b in active_tier(out)] == ["a", "a"]


def test_cluster_weights_sum_endpoint_weights_and_skip_external():
    ext = Endpoint("ml", "saas", {"tier": "saas"}, url="http://127.0.0.1:1", external=True)
    endpoints = eps("a", 2, "x") + eps("b", 1, "y") + [ext]
    out = compute_weights([entry("a", 80), entry("b", 20), RouteEntry("s", 10, {"tier": "saas"})], endpoints)
    assert cluster_weights(out) == {"x": 8, "y": 2}
    assert [b.weight for b in out if b.endpoint.external] == [1]


def test_clamp_keeps_every_backend_routable():
    endpoints = eps("a", 1) + eps("b", 3)
    out = compute_weights([entry("a", 1_000_000), entry("b", 1)], endpoints)
    assert max(ws(out)) == 1_000_000 and min(ws(out)) >= 1
