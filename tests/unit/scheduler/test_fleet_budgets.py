"""FleetBudget (issue 14): the most DRA devices a scope may claim fleet-wide, fail closed."""

import pytest

from .helpers import (
    H100,
    PolicyCase,
    check_policy,
    cluster,
    deployment,
    device,
    engine,
    fleet_budget,
    inference_class,
    member,
    of,
    pool,
    prev,
    request,
    standalone,
)

W = "WithinBudget"
H8 = inference_class("h100x8", device("gpu", 8, "81559Mi"),
                     {**device("nic", 8, claim="DRA", driver="nic.example.com")})
EIGHT = cluster("big", pool("p8", "h100x8", 4))
ONES = cluster("ones", pool("p1", "h100", 9))


def d(name: str, replicas: int, *engines: dict, ns: str = "ml", labels: dict | None = None) -> dict:
    return deployment(name, replicas, *engines, namespace=ns, labels=labels)


def gpus_and_nics(gpus: int, nics: int) -> dict:
    return engine("main", member("Standalone", request("gpu", gpus),
                                 request("nic", nics, 'device.driver == "nic.example.com"')))


CASES = [
    PolicyCase("a namespace budget caps placement; the rest is Blocked",
               [H100, ONES, d("m", 3), fleet_budget("ml", 2, namespaces=["ml"])], {"m": ["ones#0", "ones#1"]},
               conditions={"m": {W: ("False", "BudgetExceeded"), "ReplicasScheduled": ("False", "PartialCapacity")}},
               verdicts={"m": ["Blocked"]}, namespace="ml"),
    PolicyCase("a budget with room reports how much is used",
               [H100, ONES, d("m", 2), fleet_budget("ml", 5, namespaces=["ml"])], {"m": ["ones#0", "ones#1"]},
               conditions={"m": {W: ("True", "WithinBudget")}}, namespace="ml"),
    PolicyCase("other namespaces are outside the budget",
               [H100, ONES, d("m", 3), fleet_budget("ml", 1, namespaces=["other"])],
               {"m": ["ones#0", "ones#1", "ones#2"]}, namespace="ml"),
    PolicyCase("a label selector picks the deployments",
               [H100, ONES, d("m", 3, labels={"example.org/team": "search"}), d("n", 3),
                fleet_budget("search", 1, selector={"example.org/team": "search"})],
               {"m": ["ones#0"], "n": ["ones#0", "ones#1", "ones#2"]}, namespace="ml"),
    PolicyCase("devices are requests' count x pods x copies: 4 a replica, 2 fit in 9",
               [H8, EIGHT, d("m", 3, engine("main", standalone(gpus=2), copies=2)),
                fleet_budget("ml", 9, namespaces=["ml"])], {"m": ["big#0", "big#1"]},
               accounting="Device", verdicts={"m": ["Blocked"]}, namespace="ml"),
    PolicyCase("Node accounting still counts devices, not nodes",
               [H8, EIGHT, d("m", 3, engine("main", standalone(gpus=2))), fleet_budget("ml", 4)],
               {"m": ["big#0", "big#1"]}, namespace="ml"),
    PolicyCase("deviceClassNames: only GPUs count, NICs do not",
               [H8, EIGHT, d("m", 3, gpus_and_nics(2, 2)), fleet_budget("gpus", 6, classes=["gpu.nvidia.com"])],
               {"m": ["big#0", "big#1", "big#2"]}, accounting="Device", namespace="ml"),
    PolicyCase("without deviceClassNames every DRA device counts",
               [H8, EIGHT, d("m", 3, gpus_and_nics(2, 2)), fleet_budget("all", 6)], {"m": ["big#0"]},
               accounting="Device", namespace="ml"),
    PolicyCase("a lowered budget drops kept replicas, so the plan never exceeds it",
               [H100, ONES, d("m", 3), fleet_budget("ml", 2, namespaces=["ml"])], {"m": ["ones#0", "ones#1"]},
               previous=prev(*(("m", "ones", i, {"main": "p1"}) for i in range(3)), namespace="ml"),
               conditions={"m": {W: ("False", "BudgetExceeded")}}, namespace="ml"),
    PolicyCase("one budget over two deployments fills them in (namespace, name) order",
               [H100, ONES, d("a", 2), d("b", 2), fleet_budget("ml", 3, namespaces=["ml"])],
               {"a": ["ones#0", "ones#1"], "b": ["ones#0"]},
               conditions={"a": {W: ("True", "WithinBudget")}, "b": {W: ("False", "BudgetExceeded")}},
               namespace="ml"),
    PolicyCase("a zero budget parks the scope",
               [H100, ONES, d("m", 1), fleet_budget("ml", 0, namespaces=["ml"])], {"m": []},
               verdicts={"m": ["Blocked"]}, namespace="ml"),
]


@pytest.mark.parametrize("case", CASES, ids=str)
def test_budget(case: PolicyCase) -> None:
    check_policy(case)


def test_budget_status_in_json() -> None:
    fp = check_policy(CASES[0])
    (b,) = fp.to_json()["budgets"]
    assert (b["name"], b["maxDevices"], b["used"], b["deployments"], b["refusedReplicas"]) == (
        "ml", 2, 2, ["ml/m"], 1)
    assert b["conditions"][0]["reason"] == "BudgetExceeded"


def test_dropped_replica_says_why() -> None:
    fp = check_policy(CASES[8])
    (dropped,) = of(fp, "m", "ml").dropped
    assert dropped[1].message.startswith("over FleetBudget ml:")


def test_the_budget_message_names_what_is_left() -> None:
    fp = check_policy(CASES[0])
    message = of(fp, "m", "ml").unplaced[0].feasibility.message
    assert message == "FleetBudget ml: a replica needs 1 device, 0 of 2 left"


def test_replicas_dropped_for_overdraw_give_their_devices_back() -> None:
    """Three kept on `ones`, which now holds one: the budget (2) first keeps two, the
    ledger keeps one of those (overdraw); the budget then has room for one more
    elsewhere, and uses it."""
    docs = [H100, cluster("ones", pool("p1", "h100", 1)), cluster("twos", pool("p1", "h100", 5)),
            d("m", 3), fleet_budget("ml", 2, namespaces=["ml"])]
    fp = check_policy(PolicyCase("overdraw and budget", docs, {"m": ["ones#0", "twos#0"]},
                                 previous=prev(*(("m", "ones", i, {"main": "p1"}) for i in range(3)), namespace="ml"),
                                 namespace="ml"))
    assert [(b.used, b.refused) for b in fp.budgets] == [(2, 2)]
