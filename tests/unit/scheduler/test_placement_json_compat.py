"""Placement documents written before the scheduler was reshaped read back, and write out,
byte for byte as they did: `plan --json` output and the placement resource's state are
the program's only memory between runs, so no reshape may change how they are read.

Held: every `plan --json` snapshot round-trips to itself; hand-written documents of older
schemas (no `members`, no `requests`, one copy of the reasons per unplaced replica, every
policy block and a state's extra keys) re-serialise exactly as `legacy/*.roundtrip.json`
says (written by the scheduler at d1a64a4; since issue 31 an unplaced replica's per-cluster
`reasons` are written as today's `refusals` summary, each message a group of its own
words: the only change), and what they carry into the next plan (`"ready": false`, moves,
failovers) is read the same.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from modelplane.scheduler import FleetPlacement

SNAPSHOTS = Path(__file__).resolve().parent / "snapshots"
PLANS = sorted(p for p in SNAPSHOTS.glob("*.json") if not p.name.endswith(".sha256.json"))
LEGACY = sorted(p for p in (SNAPSHOTS / "legacy").glob("*.json") if not p.name.endswith(".roundtrip.json"))


def rewrite(doc: object) -> str:
    return json.dumps(FleetPlacement.from_json(doc).to_json(), separators=(",", ":")) + "\n"


@pytest.mark.parametrize("path", PLANS, ids=[p.name for p in PLANS])
def test_a_plan_document_reads_back_to_the_same_bytes(path: Path) -> None:
    text = path.read_text()
    assert rewrite(json.loads(text)) == text


@pytest.mark.parametrize("path", LEGACY, ids=[p.name for p in LEGACY])
def test_an_older_document_rewrites_as_it_did_before_the_reshape(path: Path) -> None:
    want = path.with_name(path.name.replace(".json", ".roundtrip.json")).read_text()
    assert rewrite(json.loads(path.read_text())) == want


def test_what_an_older_document_carries_into_the_next_plan_is_read_the_same() -> None:
    doc = json.loads((SNAPSHOTS / "legacy" / "policies-and-state.json").read_text())
    placement = FleetPlacement.from_json(doc)
    chat = placement.find("ml-team", "chat")
    assert chat is not None and chat.policy is not None
    assert chat.policy.not_ready == frozenset({"chat-7ea37"})
    assert [(m.from_, m.to) for m in chat.policy.moves] == [("chat-fc102", "chat-7ea37")]
    assert chat.policy.return_streak == 2
    assert [(f.from_, f.cluster, f.to) for f in chat.failover] == [("chat-old01", "down", "chat-db2d8"),
                                                                    ("chat-old02", "down", None)]
    assert chat.unplaced[1].reasons is chat.unplaced[0].reasons
    assert [d.name for d in placement.deployments] == ["a-first", "chat"]
    old = FleetPlacement.from_json(json.loads((SNAPSHOTS / "legacy" / "before-members.json").read_text()))
    engine = old.deployments[0].replicas[0].engines["mock"]
    assert (engine.pool, engine.member_pools, engine.requests) == ("gpu", (), ())
    assert engine.pools_for(2) == ("gpu", "gpu")


def test_the_json_text_plan_prints_is_json_dumps_of_the_placement():
    """`FleetPlacement.to_json_text` encodes the engine placements replicas share once; it
    must print exactly what json.dumps of `to_json()` prints, on fleets where many share."""
    import sys

    from modelplane.api import load_documents
    from modelplane.scheduler import place_fleet

    sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))
    try:
        import oversubscribed_fleet
    finally:
        sys.path.pop(0)
    for accounting in ("Device", "Node"):
        placement = place_fleet(load_documents(oversubscribed_fleet.fleet(30, 40)), accounting=accounting)
        assert any(d.unplaced for d in placement.deployments), "no deployment is short here"
        engines = [e for d in placement.deployments for r in d.replicas for e in r.engines.values()]
        assert len({id(e) for e in engines}) < len(engines), "no replicas share their engine placements here"
        assert placement.to_json_text() == json.dumps(placement.to_json(), separators=(",", ":"))
    for path in PLANS:
        placement = FleetPlacement.from_json(json.loads(path.read_text()))
        assert placement.to_json_text() + "\n" == path.read_text()
