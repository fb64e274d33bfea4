"""Issue 9, item 5: a `--previous` that keeps more on a pool than it holds is reported as
`Overdrawn` and the excess is not kept (placed again where it fits): no plan renders
more than fits."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from hypothesis import given

from modelplane.__main__ import main
from modelplane.api import load_documents
from modelplane.naming import replica_name
from modelplane.scheduler import FleetPlacement, place_fleet, place_fleet_with_ledger
from tests.property.fleets import fleets
from tests.property.test_scheduler_properties import MODES, SETTINGS, assert_within_capacity

from .helpers import cluster, deployment, gpu_class, of, plan, pool, prev, to_yaml, where

TWO_KEPT = prev(("m", "a", 0, {"main": "p1"}), ("m", "a", 1, {"main": "p1"}))


@pytest.mark.parametrize("accounting", ["Node", "Device"])
def test_5_two_replicas_kept_on_a_one_gpu_cluster_keep_only_one(accounting):
    fp = plan([gpu_class("h100", 1), cluster("a", pool("p1", "h100", 1)), deployment("m", 2)],
              previous=TWO_KEPT, accounting=accounting)
    assert where(fp, "m") == ["a#0"]
    scheduled, overdrawn = of(fp, "m").conditions
    assert (scheduled.type, scheduled.status, scheduled.reason) == ("ReplicasScheduled", "False", "PartialCapacity")
    assert (overdrawn.type, overdrawn.status, overdrawn.reason) == ("Overdrawn", "True",
                                                                    "PreviousPlacementOvercommitted")
    assert f"{replica_name('m', 'a', 1)} (a#1, pool p1, short by 1" in overdrawn.message
    (dropped, why), = of(fp, "m").dropped
    assert (dropped.cluster, dropped.index) == ("a", 1) and "holds less than the previous placement" in why.message
    assert len(of(fp, "m").unplaced) == 1


def test_5_the_excess_moves_where_there_is_room():
    fp = plan([gpu_class("h100", 1), cluster("a", pool("p1", "h100", 1)), cluster("b", pool("p1", "h100", 1)),
               deployment("m", 2)], previous=TWO_KEPT, accounting="Device")
    assert where(fp, "m") == ["a#0", "b#0"]
    assert [(c.type, c.status) for c in of(fp, "m").conditions] == [("ReplicasScheduled", "True"),
                                                                     ("Overdrawn", "True")]


def test_5_a_plan_that_fits_has_no_overdrawn_condition():
    fp = plan([gpu_class("h100", 1), cluster("a", pool("p1", "h100", 2)), deployment("m", 2)],
              previous=TWO_KEPT, accounting="Device")
    assert where(fp, "m") == ["a#0", "a#1"]
    assert [c.type for c in of(fp, "m").conditions] == ["ReplicasScheduled"]


def test_5_plan_and_render_never_render_more_than_fits(tmp_path: Path, capsys):
    fleet = tmp_path / "fleet"
    fleet.mkdir()
    (fleet / "fleet.yaml").write_text(to_yaml([gpu_class("h100", 1), cluster("a", pool("p1", "h100", 1)),
                                               deployment("m", 2)]))
    previous = tmp_path / "previous.json"
    previous.write_text(json.dumps(TWO_KEPT.to_json()))
    assert main(["plan", str(fleet), "--previous", str(previous)]) == 0
    out = capsys.readouterr().out
    assert "default/m: 1 of 2 replicas placed" in out
    assert "Overdrawn=True PreviousPlacementOvercommitted" in out
    assert main(["render", str(fleet), str(tmp_path / "out"), "--previous", str(previous)]) == 0
    assert "default/m: 1 of 2 replicas placed" in capsys.readouterr().out
    rendered = "".join(p.read_text() for p in (tmp_path / "out").rglob("*.yaml"))
    assert replica_name("m", "a", 0) in rendered and replica_name("m", "a", 1) not in rendered


@SETTINGS
@given(fleets(), MODES)
def test_5_any_previous_placement_is_kept_only_as_far_as_it_fits(docs, accounting):
    """Double every placed replica in its previous placement (same pools, new indexes):
    whatever the previous placement claims, the plan never overcommits a pool."""
    fleet = load_documents(copy.deepcopy(docs))
    first = place_fleet(fleet, accounting=accounting).to_json()
    for dep in first["deployments"]:
        extra = []
        for r in dep["replicas"]:
            twin = dict(r, index=r["index"] + 1000, name=replica_name(dep["name"], r["cluster"], r["index"] + 1000))
            extra.append(twin)
        dep["replicas"] += extra
    previous = FleetPlacement.from_json(first)
    fp, ledger = place_fleet_with_ledger(fleet, previous=previous, accounting=accounting)
    assert_within_capacity(fleet, fp, ledger, accounting)
