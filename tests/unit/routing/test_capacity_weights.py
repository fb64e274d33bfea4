"""`routingPolicy.weighting: Capacity` (issue 14): an entry's share split in proportion
to each endpoint's serving capacity instead of evenly. Even entries keep the reference's
numbers (test_weights.py)."""
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from modelplane.api import load_manifest_text
from modelplane.routing import (
    CAPACITY,
    DEPLOYMENT_LABEL,
    MAX_WEIGHT,
    RouteEntry,
    compute_weights,
    replica_endpoint,
    route_entries,
    serving_capacity,
)
from tests.manifests import deployment, engine, model_service, service_entry, standalone, to_yaml


def eps(dep: str, *caps: int, ready: bool = True):
    return [replica_endpoint("ml", f"{dep}-{i}", dep, "c1", i, ready=ready, capacity=c) for i, c in enumerate(caps)]


def entry(dep: str, weight: int = 1, weighting: str = CAPACITY, priority: int = 0) -> RouteEntry:
    return RouteEntry(dep, weight, {DEPLOYMENT_LABEL: dep}, priority, weighting)


def ws(backends):
    return [b.weight for b in backends]


CASES = [
    # name, entries [(dep, weight, weighting, capacities)], expected weights in endpoint order
    ("capacity 2:1 in one entry", [("a", 1, CAPACITY, (2, 1))], [2, 1]),
    ("Karmada's dynamicWeight example 6:12:18 is 1:2:3", [("a", 1, CAPACITY, (6, 12, 18))], [1, 2, 3]),
    ("equal capacities behave like Even", [("a", 5, CAPACITY, (4, 4, 4))], [1, 1, 1]),
    ("Even ignores capacity (the reference)", [("a", 1, "Even", (3, 1))], [1, 1]),
    ("capacity entry next to an even one keeps 1:1 between entries",
     [("a", 1, CAPACITY, (2, 1)), ("b", 1, "Even", (5,))], [2, 1, 3]),
    ("90/10 over entries, 3:1 inside the capacity entry",
     [("a", 90, CAPACITY, (3, 1)), ("b", 10, "Even", (1,))], [27, 9, 4]),
    ("even entry needing a larger scale", [("a", 1, CAPACITY, (1, 1)), ("b", 1, "Even", (1, 1, 1))],
     [2, 2, 2, 1, 1]),
    ("zero capacity counts as one", [("a", 1, CAPACITY, (0, 1))], [1, 1]),
]


@pytest.mark.parametrize("name, spec, expected", CASES, ids=[c[0] for c in CASES])
def test_capacity_weighting(name, spec, expected):
    entries, endpoints = [], []
    for dep, weight, weighting, caps in spec:
        entries.append(entry(dep, weight, weighting))
        endpoints += eps(dep, *caps)
    assert ws(compute_weights(entries, endpoints)) == expected, name


def test_not_ready_endpoint_leaves_the_split_to_the_ready_ones():
    endpoints = eps("a", 3, 1)
    endpoints[0] = replace(endpoints[0], ready=False)
    out = compute_weights([entry("a")], endpoints)
    assert [(b.endpoint.name, b.weight) for b in out] == [("a-1", 1)]


def test_weights_stay_under_the_gateway_cap():
    out = compute_weights([entry("a", 1_000_000), entry("b", 1, "Even")], eps("a", 999_983, 1) + eps("b", 1, 1))
    assert max(ws(out)) <= MAX_WEIGHT and min(ws(out)) >= 1


@settings(max_examples=200, deadline=None)
@given(caps=st.lists(st.integers(1, 64), min_size=1, max_size=8), weight=st.integers(1, 1000))
def test_capacity_split_is_exactly_proportional(caps, weight):
    out = ws(compute_weights([entry("a", weight)], eps("a", *caps)))
    # w_i / w_j == c_i / c_j for every pair: the split is the capacity ratio, exactly
    assert all(out[i] * caps[j] == out[j] * caps[i] for i in range(len(caps)) for j in range(len(caps)))


@settings(max_examples=200, deadline=None)
@given(caps=st.lists(st.integers(1, 64), min_size=1, max_size=6), n_even=st.integers(1, 6),
       w_cap=st.integers(1, 100), w_even=st.integers(1, 100))
def test_entry_shares_follow_entry_weights(caps, n_even, w_cap, w_even):
    out = compute_weights([entry("a", w_cap), entry("b", w_even, "Even")], eps("a", *caps) + eps("b", *[1] * n_even))
    cap_total = sum(b.weight for b in out if b.entry == "a")
    even = [b.weight for b in out if b.entry == "b"]
    assert cap_total * w_even == sum(even) * w_cap       # entry shares are exact
    assert max(even) - min(even) <= 1                   # the even entry still splits evenly


def service(*entries) -> str:
    return to_yaml([model_service("chat", *entries, namespace="ml")])


def test_route_entries_read_the_routing_policy():
    text = service(service_entry({DEPLOYMENT_LABEL: "a"}, CAPACITY), service_entry({DEPLOYMENT_LABEL: "b"}))
    svc = next(iter(load_manifest_text(text).services.values()))
    assert [e.weighting for e in route_entries(svc)] == [CAPACITY, "Even"]


def test_serving_capacity_counts_copies_of_serving_engines():
    unified = deployment("u", 1, engine("main", standalone(), copies=3))
    pd = deployment("pd", 1, {**engine("pre", standalone(), copies=2), "phase": "Prefill"},
                    {**engine("dec", standalone(), copies=5), "phase": "Decode"})
    pd["spec"]["template"]["spec"]["serving"] = {"mode": "PrefillDecode"}
    fleet = load_manifest_text(to_yaml([unified, pd]))
    caps = {k[1]: serving_capacity(d) for k, d in fleet.deployments.items()}
    assert caps == {"u": 3, "pd": 5}


def test_plan_to_routes_weighs_replicas_by_their_copies():
    """Manifests -> placement -> endpoints -> weights: one entry over two deployments of
    one app, 3 copies vs 1, splits 3:1 instead of the reference's 1:1."""
    from modelplane.gateway.fleet import fleet_routes, placement_endpoints
    from modelplane.scheduler import place_fleet
    from tests.manifests import cluster, gpu_class, pool

    big = deployment("big", 1, engine("main", standalone(), copies=3), namespace="ml")
    small = deployment("small", 1, namespace="ml")
    for d in (big, small):
        d["spec"]["template"]["metadata"] = {"labels": {"example.org/app": "chat"}}
    app = service_entry({"example.org/app": "chat"}, CAPACITY)
    docs = to_yaml([gpu_class("h100", 8), cluster("c1", pool("p", "h100", 1)), big, small]) + "---\n" + service(app)
    fleet = load_manifest_text(docs)
    placement = place_fleet(fleet)
    (route,) = fleet_routes(fleet, placement_endpoints(fleet, placement))
    assert sorted((b.endpoint.deployment, b.weight) for b in route.backends) == [("big", 3), ("small", 1)]
