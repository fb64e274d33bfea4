"""The placement provider called directly, the way the engine calls it (no engine)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from pulumi.dynamic.dynamic import serialize_provider
from pulumi.output import Unknown

from modelplane.engine_json import digest
from providers.placement import FLEET_DIGEST, PlacementProvider, normalize_numbers, replica_changes
from tests.engine_values import through_the_engine
from tests.pulumi.fleets import documents, fleet_text
from tests.pulumi.harness import ROOT_DIR


def check(news: dict, olds: dict | None = None) -> dict:
    result = PlacementProvider().check(olds or {}, news)
    assert not result.failures, [f.reason for f in result.failures]
    return result.inputs


def inputs(text: str, accounting: str = "Device") -> dict:
    return {"fleet": documents(text), "accounting": accounting, "__provider": "opaque"}


def where(state: dict) -> dict[str, list[tuple[str, int]]]:
    return {f"{d['namespace']}/{d['name']}": [(r["cluster"], r["index"]) for r in d["replicas"]]
            for d in state["placement"]["deployments"]}


def as_engine_state(state: dict) -> dict:
    """What the engine hands back as olds: ints became floats in protobuf Structs."""
    return through_the_engine(state)


def test_check_without_olds_places_and_keeps_every_input():
    news = inputs(fleet_text({"eu-west": 1, "us-east": 1}, {"chat": 1, "chat-canary": 1}))
    out = check(news)
    assert {k: out[k] for k in news} == news  # starts from news: nothing dropped
    # spread: two deployments with one replica each land in different regions
    assert where(out) == {"ml-team/chat": [("eu-west", 0)], "ml-team/chat-canary": [("us-east", 0)]}


def test_retention_over_two_runs_keeps_replicas_put():
    first = check(inputs(fleet_text({"eu-west": 1, "us-east": 1}, {"chat": 1})))
    assert where(first) == {"ml-team/chat": [("eu-west", 0)]}
    # A new, alphabetically earlier cluster would win a fresh placement; the kept replica stays.
    second = check(inputs(fleet_text({"ap-south": 1, "eu-west": 1, "us-east": 1}, {"chat": 1})),
                   olds=as_engine_state(first))
    assert where(second) == {"ml-team/chat": [("eu-west", 0)]}
    fresh = check(inputs(fleet_text({"ap-south": 1, "eu-west": 1, "us-east": 1}, {"chat": 1})))
    assert where(fresh) == {"ml-team/chat": [("ap-south", 0)]}


def test_scale_up_keeps_existing_and_adds_and_scale_down_removes():
    clusters = {"eu-west": 2, "us-east": 2}
    one = check(inputs(fleet_text(clusters, {"chat": 1})))
    three = check(inputs(fleet_text(clusters, {"chat": 3})), olds=as_engine_state(one))
    assert set(where(one)["ml-team/chat"]) <= set(where(three)["ml-team/chat"])
    assert len(where(three)["ml-team/chat"]) == 3
    moves = replica_changes(one["placement"], three["placement"])
    assert len(moves["kept"]) == 1 and len(moves["added"]) == 2 and moves["removed"] == []
    two = check(inputs(fleet_text(clusters, {"chat": 2})), olds=as_engine_state(three))
    kept = where(two)["ml-team/chat"]
    assert len(kept) == 2 and set(kept) <= set(where(three)["ml-team/chat"])
    # scale down leaves spread: one replica per cluster
    assert sorted(c for c, _ in kept) == ["eu-west", "us-east"]


def test_drained_cluster_moves_its_replica():
    first = check(inputs(fleet_text({"eu-west": 1, "us-east": 1}, {"chat": 1})))
    assert where(first) == {"ml-team/chat": [("eu-west", 0)]}
    drained = check(inputs(fleet_text({"eu-west": 1, "us-east": 1}, {"chat": 1}, tainted={"eu-west": "NoExecute"})),
                    olds=as_engine_state(first))
    assert where(drained) == {"ml-team/chat": [("us-east", 0)]}
    # NoSchedule only stops new placements: the replica stays.
    cordoned = check(inputs(fleet_text({"eu-west": 1, "us-east": 1}, {"chat": 1}, tainted={"eu-west": "NoSchedule"})),
                     olds=as_engine_state(first))
    assert where(cordoned) == {"ml-team/chat": [("eu-west", 0)]}


def test_shortfall_is_reported_with_reasons():
    out = check(inputs(fleet_text({"eu-west": 1, "us-east": 1}, {"chat": 2}, copies=2)))
    dep = out["placement"]["deployments"][0]
    assert dep["replicas"] == [] and len(dep["unplaced"]) == 2
    refusals = dep["unplaced"][0]["refusals"]
    assert refusals["clusters"] == 2
    assert {name for group in refusals["groups"] for name in group["examples"]} == {"eu-west", "us-east"}
    assert dep["conditions"][0]["status"] == "False"


@pytest.mark.parametrize("key", ["fleet", "accounting"])
def test_unknown_driving_input_makes_placement_unknown(key):
    news = inputs(fleet_text({"eu-west": 1}, {"chat": 1}))
    news[key] = Unknown()
    out = check(news)
    assert isinstance(out["placement"], Unknown)


def test_unknown_nested_in_a_document_makes_placement_unknown():
    news = inputs(fleet_text({"eu-west": 1}, {"chat": 1}))
    news["fleet"][0]["metadata"]["name"] = Unknown()
    assert isinstance(check(news)["placement"], Unknown)


def test_bad_manifest_is_a_check_failure_naming_it():
    news = inputs(fleet_text({"eu-west": 1}, {"chat": 1}))
    news["fleet"][-1]["spec"]["replicas"] = -1
    result = PlacementProvider().check({}, news)
    assert result.failures and result.failures[0].property == "fleet"
    assert "ModelDeployment" in result.failures[0].reason and "chat" in result.failures[0].reason


def test_bad_accounting_and_unreadable_previous_are_check_failures():
    news = inputs(fleet_text({"eu-west": 1}, {"chat": 1}), accounting="Rack")
    assert PlacementProvider().check({}, news).failures[0].property == "accounting"
    news = inputs(fleet_text({"eu-west": 1}, {"chat": 1}))
    result = PlacementProvider().check({"placement": {"deployments": "nope"}}, news)
    assert result.failures[0].property == "placement"


def test_diff_reports_no_change_for_the_same_placement():
    state = check(inputs(fleet_text({"eu-west": 1}, {"chat": 1})))
    outs = as_engine_state(PlacementProvider().create(state).outs)   # diff's olds are the old outputs
    diff = PlacementProvider().diff("id", outs, check(inputs(fleet_text({"eu-west": 1}, {"chat": 1})),
                                                      olds=as_engine_state(state)))
    assert diff.changes is False and diff.replaces == []


def test_diff_sees_a_fleet_change_that_moves_no_replica_through_the_digest():
    state = check(inputs(fleet_text({"eu-west": 1}, {"chat": 1})))
    outs = as_engine_state(PlacementProvider().create(state).outs)
    grown = check(inputs(fleet_text({"eu-west": 2}, {"chat": 1})), olds=as_engine_state(state))
    assert grown["placement"] == state["placement"]
    assert PlacementProvider().diff("id", outs, grown).changes is True
    # outputs written before the digest (the whole fleet, no digest) update once
    assert PlacementProvider().diff("id", as_engine_state(state), state).changes is True


def test_diff_reports_added_kept_removed_and_never_replaces():
    old = check(inputs(fleet_text({"eu-west": 1, "us-east": 1}, {"chat": 1})))
    new = check(inputs(fleet_text({"eu-west": 1, "us-east": 1}, {"chat": 1}, tainted={"eu-west": "NoExecute"})),
                olds=as_engine_state(old))
    diff = PlacementProvider().diff("id", as_engine_state(old), new)
    assert diff.changes is True and diff.replaces == []
    assert replica_changes(old["placement"], new["placement"]) == {
        "added": [["ml-team/chat", "us-east", 0]], "kept": [], "removed": [["ml-team/chat", "eu-west", 0]]}


def test_diff_with_unknown_placement_is_a_change():
    old = check(inputs(fleet_text({"eu-west": 1}, {"chat": 1})))
    diff = PlacementProvider().diff("id", old, {**old, "placement": Unknown()})
    assert diff.changes is True


def test_create_and_update_return_every_output_but_a_second_copy_of_the_fleet():
    props = check(inputs(fleet_text({"eu-west": 1}, {"chat": 1})))
    expected = {**{k: v for k, v in props.items() if k != "fleet"}, FLEET_DIGEST: digest(props["fleet"])}
    created = PlacementProvider().create(props)
    assert created.outs == expected and created.id
    updated = PlacementProvider().update("id", {"placement": None}, props)
    assert updated.outs == expected  # a partial dict would drop the placement from state


def test_normalize_numbers_only_touches_integral_floats():
    assert normalize_numbers({"a": [0.0, 1.5, True, "2"]}) == {"a": [0, 1.5, True, "2"]}


def test_provider_pickles_by_reference_and_imports_without_side_effects():
    blob = serialize_provider(PlacementProvider())
    assert len(blob) < 200  # by reference: module and class name, no captured state
    code = ("import sys; import providers.placement; "
            "assert 'modelplane.scheduler' not in sys.modules; "
            "import pulumi.runtime.settings as s; assert s.get_root_resource() is None")
    subprocess.run([sys.executable, "-c", code], cwd=ROOT_DIR, check=True)
