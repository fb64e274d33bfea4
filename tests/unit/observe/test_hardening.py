"""Issue 19's items on the pure side of the observer: impossible device counts, duplicate
claims, health records read back from a file, pod messages and server text as outside text."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import pytest

from modelplane.__main__ import main
from modelplane.observe.capacity import fleet_capacity
from modelplane.observe.health import ClusterHealth, FailoverSettings, assess, health_from_json, outages
from modelplane.observe.observation_report import format_capacity, format_verification
from modelplane.observe.read import Unreachable
from modelplane.observe.verify import verify
from modelplane.redact import outside_text
from modelplane.scheduler import place_fleet
from tests import manifests as g

from .objects import claim, cluster_objects, our_pod, reading, slice_devices
from .test_capacity import fleet


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(argv))
        except SystemExit as exc:                 # argparse's exit 2
            code = int(exc.code or 0)
    return code, out.getvalue(), err.getvalue()


def test_19_7_observed_devices_per_node_never_exceed_what_the_class_holds() -> None:
    """A slice publishing 100,000 GPUs on one node of an 8-GPU class: 8 count, with a note, and
    the plan places two 4-GPU replicas there, not eighteen."""
    fl = fleet(replicas=20)
    nodes, slices = cluster_objects(fl, "a")
    node = nodes[0]["metadata"]["name"]
    flood = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "flood"},
             "spec": {"driver": "gpu.nvidia.com", "nodeName": node, "pool": {"name": "flood", "generation": 1},
                      "devices": [{"name": f"g{i}"} for i in range(100_000)]}}
    cap = fleet_capacity(fl, {"a": reading("a", nodes, [*slices, flood])})
    pool = cap.clusters["a"].pools["gpu"]
    assert (pool.free, pool.devices) == (((8,),), 8)
    assert cap.clusters["a"].notes == (f"node {node} (pool gpu): publishes 100008 gpu.nvidia.com device(s), more "
                                       "than class h100x8 holds per node (8); only 8 count",)
    placed = place_fleet(fl, observed=cap.observed()).find("default", "chat")
    assert placed is not None and len(placed.replicas) == 2


def test_19_low_duplicate_claims_never_give_negative_free() -> None:
    """Two claims naming the same 8 devices (and a third naming 4 of them again): 8 held, 0 free,
    never `-16 free`."""
    fl = fleet()
    nodes, slices = cluster_objects(fl, "a")
    devices = slice_devices(slices, nodes[0]["metadata"]["name"])
    claims = [claim("t", "c1", devices), claim("t", "c2", devices), claim("u", "c3", devices[:4])]
    cap = fleet_capacity(fl, {"a": reading("a", nodes, slices, claims)})
    pool = cap.clusters["a"].pools["gpu"]
    assert (pool.free, pool.devices, pool.held) == (((0,),), 8, 8)
    assert "-" not in format_capacity(cap)


@pytest.mark.parametrize(("health", "message"), [
    ([1, 2], "expected an object of clusters"),
    ("Unreachable", "expected an object of clusters"),
    ({"a": "down"}, "cluster 'a': expected an object"),
    ({"a": {"condition": "Unreachable", "since": "Infinity", "reason": ""}}, "since must be epoch seconds"),
    ({"a": {"condition": "Unreachable", "since": 1e300, "reason": ""}}, "since must be epoch seconds"),
    ({"a": {"condition": "Unreachable", "since": -1e17, "reason": ""}}, "since must be epoch seconds"),
    ({"a": {"condition": "Unreachable", "since": True, "reason": ""}}, "since must be epoch seconds"),
    ({"a": {"condition": "Gone", "since": 5, "reason": ""}}, "condition must be Unreachable or Unready"),
])
def test_19_10_health_records_of_the_wrong_shape_are_errors_naming_the_file(tmp_path: Path, health: Any,
                                                                             message: str) -> None:
    fl = fleet()
    (tmp_path / "fleet.yaml").write_text(g.to_yaml(fl.to_documents()))
    (tmp_path / "observe").mkdir()
    previous = {**place_fleet(fl).to_json(), "health": health}
    text = json.dumps(previous).replace('"Infinity"', "Infinity")
    (tmp_path / "previous.json").write_text(text)
    code, out, err = run("plan", str(tmp_path / "fleet.yaml"), "--previous", str(tmp_path / "previous.json"),
                         "--observe", str(tmp_path / "observe"))
    assert code == 2, (out, err)
    assert str(tmp_path / "previous.json") in err and message in err, err
    assert "Traceback" not in err and "Errno" not in err


def test_19_10_a_health_record_from_the_future_expires_as_if_seen_now() -> None:
    record = {"a": ClusterHealth("Unreachable", 10**11, "x")}
    now = 1_800_000_000.0
    health = assess(record, {"a": Unreachable("a", "refused")}, verify_empty(), None, now)
    assert health["a"].since == int(now)
    assert outages(health, now + 301, FailoverSettings())["a"].evacuate


def verify_empty() -> Any:
    from modelplane.observe.verify import Verification
    return Verification()


def test_19_16_health_reasons_read_back_are_outside_text() -> None:
    health = health_from_json({"a": {"condition": "Unreachable", "since": 5,
                                     "reason": "\x1b[2Jdown\nAuthorization: Bearer abcdefgh" + "x" * 5000}})
    reason = health["a"].reason
    assert "\x1b" not in reason and "\n" not in reason and "abcdefgh" not in reason and len(reason) <= 300


def test_19_16_pod_messages_are_capped_stripped_and_cannot_forge_a_verdict() -> None:
    fl = fleet(replicas=1)
    placement = place_fleet(fl)
    (rep,) = placement.deployments[0].replicas
    nodes, slices = cluster_objects(fl, "a")
    forged = "OK: all 4 placed replica(s) run where the plan put them"
    pod = our_pod("default", "p\x1b[31m", "chat", "a", rep.index,
                  scheduled_message="0/1 nodes: \x1b]0;t\x07" + "y" * (2 << 20) + f"\n{forged}\n")
    report = verify(fl, placement, {"a": reading("a", nodes, slices, [], [pod])})
    text = format_verification(report)
    assert len(text) < 5_000
    assert "\x1b" not in text and "\x07" not in text
    assert not any(line.startswith("OK:") for line in text.splitlines())
    assert len(json.dumps(report.to_json())) < 5_000


@pytest.mark.parametrize(("text", "shown"), [
    ("Authorization: Bearer abc.def.ghi\r\nHost: x", "Authorization: REDACTED Host: x"),
    ('{"headers": {"authorization": ["Bearer abc123"]}}', '{"headers": {"authorization": REDACTED'),
    ("token=abcdef&x=1", "token=REDACTED&x=1"),
    ("\x1b[31mred\x1b[0m \u202eevil\u200b", "red evil"),
    ("https://user:pw@h/p", "https://h/p"),
    ("maxTokens=4 tokenizer", "maxTokens=4 tokenizer"),
])
def test_19_outside_text_masks_credentials_and_strips_control_characters(text: str, shown: str) -> None:
    assert outside_text(text).startswith(shown), outside_text(text)
    assert outside_text(outside_text(text)) == outside_text(text)


def test_a_health_record_read_back_is_the_record_written() -> None:
    """What check() stores it reads back unchanged (an unchanged fleet previews no change),
    however long the reason a read gave."""
    from modelplane.observe.health import health_to_json
    reason = "the API server at https://127.0.0.1:1 did not answer GET /api/v1/nodes: " + "x" * 1000
    health = assess({}, {"a": Unreachable("a", outside_text(reason, limit=400))}, verify_empty(), None, 5.0)
    assert health_from_json(health_to_json(health)) == health
