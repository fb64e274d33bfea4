"""`python -m modelplane plan MANIFESTS --metrics FILE`: the decision at these numbers, placed,
in the table and in --json; byte-identical output for a fleet without an autoscaler; and
a metrics file that is wrong in any way is exit 2 with the file and the fix on stderr."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import pytest

from modelplane.api import load_manifests
from modelplane.commands import plan as plan_cmd
from modelplane.limits import MAX_METRICS_FILE_DEPLOYMENTS
from modelplane.scheduler import place_fleet
from tests.manifests import cluster, deployment, gpu_class, pool, replica_autoscaler, to_yaml

REPO = Path(__file__).resolve().parents[3]
EXAMPLE = REPO / "examples" / "autoscaling"


def run(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    plan_cmd.add_parser(parser.add_subparsers())
    args = parser.parse_args(["plan", *argv])
    return args.func(args)


def write(tmp_path: Path, content: object, name: str = "metrics.json") -> str:
    path = tmp_path / name
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    return str(path)


def test_the_example_scales_chat_up_and_parks_embed(capsys) -> None:
    assert run([str(EXAMPLE), "--metrics", str(EXAMPLE / "metrics.json")]) == 0
    out = capsys.readouterr().out
    assert "ml-team/chat: 3 of 3 replicas placed" in out
    assert "AUTOSCALING at the numbers in" in out and "(a first decision: no history)" in out
    assert "ml-team/chat (ReplicaAutoscaler ml-team/chat): 1 -> 3 replicas, 3 placed: ScaledUp" in out
    assert "  TimeToFirstToken: 1.2 (target 0.5) -> 3" in out
    assert "ml-team/embed (ReplicaAutoscaler ml-team/embed): 1 -> 0 replicas, 0 placed: ScaledDown" in out
    assert "ml-team/embed: 0 of 0 replicas placed" in out


def test_the_example_surge_is_limited_by_the_budget_and_says_so(capsys) -> None:
    assert run([str(EXAMPLE), "--metrics", str(EXAMPLE / "metrics-surge.json")]) == 0
    out = capsys.readouterr().out
    assert "ml-team/chat (ReplicaAutoscaler ml-team/chat): 1 -> 5 replicas, 3 placed: ScaleUpLimit" in out
    assert ("ScalingLimited=True PlacementLimited: the scheduler placed 3 of the 5 replica(s) asked for (scaled "
            "up from 1)") in out
    assert "replica #3: Blocked: FleetBudget ml-team-gpus: a replica needs 1 device, 0 of 3 left" in out
    assert "the autoscaler was already limited: ScaleUpLimit" in out


def test_json_adds_autoscaling_and_places_the_decided_counts(capsys) -> None:
    assert run([str(EXAMPLE), "--metrics", str(EXAMPLE / "metrics-surge.json"), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    (chat, embed) = doc["autoscaling"]
    assert (chat["namespace"], chat["name"], chat["target"]) == ("ml-team", "chat", "chat")
    assert (chat["current"], chat["desired"], chat["recommendation"], chat["placed"]) == (1, 5, 8, 3)
    assert chat["metrics"] == [{"type": "QueueDepth", "target": 4.0, "average": 30.0, "proposal": 8},
                               {"type": "TimeToFirstToken", "target": 0.5, "average": 4.0, "proposal": 8}]
    limited = next(x for x in chat["conditions"] if x["type"] == "ScalingLimited")
    assert (limited["status"], limited["reason"]) == ("True", "PlacementLimited")
    assert [u["verdict"] for u in chat["unplaced"]] == ["Blocked", "Blocked"]
    assert "history" not in chat, "state, not a report: the output has no clock in it"
    assert (embed["desired"], embed["placed"]) == (0, 0)
    by_name = {d["name"]: d for d in doc["deployments"]}
    assert by_name["chat"]["desired"] == 5 and len(by_name["chat"]["replicas"]) == 3


def test_json_is_deterministic(capsys) -> None:
    outputs = []
    for _ in range(2):
        assert run([str(EXAMPLE), "--metrics", str(EXAMPLE / "metrics-surge.json"), "--json"]) == 0
        outputs.append(capsys.readouterr().out)
    assert outputs[0] == outputs[1]


def test_json_is_a_previous_placement_the_next_plan_reads(tmp_path, capsys) -> None:
    assert run([str(EXAMPLE), "--metrics", str(EXAMPLE / "metrics.json"), "--json"]) == 0
    prev = write(tmp_path, capsys.readouterr().out, "prev.json")
    assert run([str(EXAMPLE), "--previous", prev, "--metrics", str(EXAMPLE / "metrics.json"), "--json"]) == 0
    again = json.loads(capsys.readouterr().out)
    chat = next(a for a in again["autoscaling"] if a["name"] == "chat")
    assert chat["current"] == 3, "the previous placement's count is the current one"


def fleet_without_autoscaler(tmp_path: Path) -> str:
    d = tmp_path / "fleet"
    d.mkdir()
    (d / "fleet.yaml").write_text(to_yaml([gpu_class("g1", 1), cluster("a", pool("p", "g1", 2)),
                                           deployment("m", 2, namespace="ml")]))
    return str(d)


@pytest.mark.parametrize("extra", [[], ["--json"]])
def test_without_an_autoscaler_the_output_is_byte_identical(tmp_path, capsys, extra) -> None:
    fleet = fleet_without_autoscaler(tmp_path)
    assert run([fleet, *extra]) == 0
    plain = capsys.readouterr().out
    assert run([fleet, "--metrics", write(tmp_path, {}), *extra]) == 0
    assert capsys.readouterr().out == plain


def test_without_metrics_plan_places_spec_replicas_as_before(capsys) -> None:
    assert run([str(EXAMPLE), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert "autoscaling" not in doc
    assert doc == json.loads(json.dumps(place_fleet(load_manifests(EXAMPLE)).to_json()))


def scaled_fleet_dir(tmp_path: Path) -> str:
    d = tmp_path / "scaled"
    d.mkdir()
    (d / "fleet.yaml").write_text(to_yaml([gpu_class("g1", 1), cluster("a", pool("p", "g1", 2)),
                                           deployment("m", 1, namespace="ml"), deployment("other", 1, namespace="ml"),
                                           replica_autoscaler("m", "m", 4, namespace="ml")]))
    return str(d)


@pytest.mark.parametrize("content, words", [
    ("{not json", "is not valid JSON: Expecting property name enclosed in double quotes (line 1, column 2)"),
    ("[]", 'must look like {"<namespace>/<deployment>": {"QueueDepth": 4.5, ...}}'),
    ('{"ml/m": {"QueueDepth": NaN}}', "ml/m.'QueueDepth': nan is not a finite number"),
    ('{"ml/m": {"QueueDepth": Infinity}}', "ml/m.'QueueDepth': inf is not a finite number"),
    ('{"ml/m": {"QueueDepth": 1e999}}', "ml/m.'QueueDepth': inf is not a finite number"),
    ('{"ml/m": {"QueueDepth": 1' + "0" * 400 + "}}", "ml/m.'QueueDepth': inf is above 1e+06"),
    ({"ml/m": {"QueueDepth": -1}}, "ml/m.'QueueDepth': -1 is negative; a QueueDepth reading is requests waiting"),
    ({"ml/m": {"QueueDepth": True}}, "ml/m.'QueueDepth': expected a number (requests waiting per ready replica)"),
    ({"ml/m": {"QueueDepth": "4"}}, "ml/m.'QueueDepth': expected a number"),
    ({"ml/m": {"QueueDepth": [4]}}, "ml/m.'QueueDepth': expected a number"),
    ({"ml/m": {"KVCacheUtilization": 85}}, "85 is above 1; a KVCacheUtilization reading is a fraction of the KV"),
    ({"ml/m": {"GPUUtilization": 0.5}}, "ml/m.'GPUUtilization': unknown metric type; use one of QueueDepth, "
                                        "RequestsRunning, KVCacheUtilization, TimeToFirstToken"),
    ({"ml/m": 4}, "ml/m must map metric types to numbers"),
    ({"m": {"QueueDepth": 1}}, "key 'm' is not \"<namespace>/<deployment>\" (it has no '/')"),
    ({"ML/m": {"QueueDepth": 1}}, "key 'ML/m' is not \"<namespace>/<deployment>\" (namespace 'ML' is not a DNS label"),
    ({"ml/" + "x" * 300: {"QueueDepth": 1}}, "is not a valid Kubernetes name"),
    ({"ml/other": {"QueueDepth": 1}}, "ml/other has no ReplicaAutoscaler (autoscaled deployments: ml/m); add one or "
                                      "remove the entry"),
    ({"ml/m": {"RequestsRunning": 1}}, "ml/m: ReplicaAutoscaler ml/m does not use RequestsRunning (it uses "
                                       "QueueDepth); add the metric to it or remove the entry"),
    ({f"ml/d{i}": {} for i in range(MAX_METRICS_FILE_DEPLOYMENTS + 1)}, "names 10001 deployments; at most 10000"),
    ("[" * 100 + "]" * 100, "nests objects and arrays more than 64 levels deep"),
])
def test_a_bad_metrics_file_is_exit_2_naming_the_file(tmp_path, capsys, content, words) -> None:
    path = write(tmp_path, content)
    assert run([scaled_fleet_dir(tmp_path), "--metrics", path]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith(f"error: metrics file {path}"), captured.err
    assert words in captured.err, captured.err
    assert "Traceback" not in captured.err


def test_unreadable_metrics_files(tmp_path, capsys) -> None:
    fleet = scaled_fleet_dir(tmp_path)
    for path, words in [(str(tmp_path / "absent.json"), "cannot read metrics file"),
                        (str(tmp_path), "is not a regular file"),
                        ("/dev/zero", "is not a regular file")]:
        assert run([fleet, "--metrics", path]) == 2
        assert words in capsys.readouterr().err
    bad = tmp_path / "latin1.json"
    bad.write_bytes(b'{"ml/m": {"QueueDepth": 1}, "\xff": 1}')
    assert run([fleet, "--metrics", str(bad)]) == 2
    assert "is not UTF-8 text (byte 0xff on line 1)" in capsys.readouterr().err
    if os.geteuid() != 0:
        locked = write(tmp_path, {}, "locked.json")
        os.chmod(locked, 0)
        assert run([fleet, "--metrics", locked]) == 2
        assert "Permission denied" in capsys.readouterr().err


def test_metrics_and_observe_together_are_refused(tmp_path, capsys) -> None:
    assert run([scaled_fleet_dir(tmp_path), "--metrics", write(tmp_path, {}), "--observe", str(tmp_path)]) == 2
    assert "--metrics does not combine with --observe yet" in capsys.readouterr().err


def test_a_deployment_the_file_leaves_out_holds_and_says_why(tmp_path, capsys) -> None:
    path = write(tmp_path, {})
    assert run([scaled_fleet_dir(tmp_path), "--metrics", path]) == 0
    out = capsys.readouterr().out
    assert "ml/m (ReplicaAutoscaler ml/m): 1 replicas, no change, 1 placed: FailedGetMetrics" in out
    assert f"  QueueDepth: unreadable: metrics file {path} gives no QueueDepth for ml/m" in out


def test_30_low_plan_metrics_fifo_is_refused_not_waited_on(tmp_path, capsys) -> None:
    fifo = tmp_path / "metrics.fifo"
    os.mkfifo(fifo)                       # no writer: open() used to block the plan for ever
    assert run([scaled_fleet_dir(tmp_path), "--metrics", str(fifo)]) == 2
    err = capsys.readouterr().err
    assert f"metrics file {fifo} is not a regular file" in err and "Traceback" not in err


def test_30_low_a_key_given_twice_in_a_metrics_file_is_an_error(tmp_path, capsys) -> None:
    fleet = scaled_fleet_dir(tmp_path)
    path = write(tmp_path, '{"ml/m": {"QueueDepth": 1, "QueueDepth": 90}}')
    assert run([fleet, "--metrics", path]) == 2
    err = capsys.readouterr().err
    assert "has the key 'QueueDepth' twice in one object" in err, err
    path = write(tmp_path, '{"ml/m": {"QueueDepth": 1}, "ml/m": {"QueueDepth": 90}}')
    assert run([fleet, "--metrics", path]) == 2
    assert "has the key 'ml/m' twice" in capsys.readouterr().err
