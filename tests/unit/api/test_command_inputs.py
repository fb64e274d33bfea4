"""Issue 9, items 7 and 11 and the low items for `--previous`, `--observed` and
`lint --config`: every bad file exits 2 with an error naming it, never a traceback."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from modelplane.__main__ import main
from modelplane.limits import MAX_JSON_DEPTH
from modelplane.scheduler import FleetPlacement, PlacedReplica
from modelplane.scheduler.cycle import DeploymentState
from modelplane.scheduler.retain import scale_down_replicas as scale_down
from modelplane.scheduler.shape import DeploymentShape
from tests.manifests import cluster, deployment, gpu_class, pool, to_yaml


@pytest.fixture
def fleet_dir(tmp_path: Path) -> Path:
    d = tmp_path / "fleet"
    d.mkdir()
    (d / "fleet.yaml").write_text(to_yaml([gpu_class("g1"), cluster("a", pool("p1", "g1", 2)),
                                           deployment("m", 2)]))
    return d


def commands(fleet: Path, option: str, path: Path, tmp_path: Path) -> list[list[str]]:
    """Every command that reads a file through `option`."""
    runs = {"--previous": [["plan", str(fleet), "--previous", str(path)],
                           ["render", str(fleet), str(tmp_path / "out"), "--previous", str(path)]],
            "--observed": [["plan", str(fleet), "--observed", str(path)],
                           ["lint", str(fleet), "--observed", str(path)]],
            "--config": [["lint", str(fleet), "--config", str(path)]]}
    return runs[option]


def run_fails(argv: list[str], capsys, *expected: str) -> str:
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err and captured.out == ""
    for text in expected:
        assert text in captured.err, (argv, captured.err)
    return captured.err


@pytest.mark.parametrize("option", ["--previous", "--observed", "--config"])
def test_7_json_nesting_200k_deep_is_an_error_naming_the_file(fleet_dir, tmp_path, capsys, option):
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 200_000 + "]" * 200_000)
    for argv in commands(fleet_dir, option, deep, tmp_path):
        run_fails(argv, capsys, str(deep), f"more than {MAX_JSON_DEPTH} levels deep")
    deep.write_text('{"a":' * (MAX_JSON_DEPTH + 1) + "1" + "}" * (MAX_JSON_DEPTH + 1))
    for argv in commands(fleet_dir, option, deep, tmp_path):
        run_fails(argv, capsys, str(deep), f"more than {MAX_JSON_DEPTH} levels deep")


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="needs /dev/zero")
@pytest.mark.parametrize("option", ["--previous", "--observed", "--config"])
def test_7_previous_dev_zero_is_refused_unread_not_a_memory_error(fleet_dir, tmp_path, capsys, option):
    for argv in commands(fleet_dir, option, Path("/dev/zero"), tmp_path):
        run_fails(argv, capsys, "/dev/zero", "is not a regular file")


@pytest.mark.parametrize("content, expected", [
    (b'{"deployments": [{"namespace": "default", "name": "m", "conditions": [{"type": "ReplicasScheduled"}]}]}',
     "$.deployments[0].conditions[0]: missing 'status'"),
    (b'{"deployments": [{"namespace": "default", "name": "m", "replicas": [{"name": "m-1", "index": true, '
     b'"cluster": "a", "engines": {}}]}]}', "$.deployments[0].replicas[0].index: expected an integer, got a boolean"),
    (b'{"deployments": [{"namespace": "default", "name": "m", "unplaced": [{"index": 0, "reasons": {"a": 1}}]}]}',
     "$.deployments[0].unplaced[0].reasons: expected an object of strings"),
    (b'{"deployments": 3}', "$.deployments: expected an array, got an integer"),
    (b"[]", "$: expected an object"),
    (b"not json", "is not valid JSON: Expecting value (line 1, column 1)"),
    (b'{"deployments": [\xff]}', "is not UTF-8 text (byte 0xff on line 1)"),
    (b'{"deployments": ' + b"1" * 5000 + b"}", "is not valid JSON: Exceeds the limit"),
])
def test_11_previous_errors_name_the_file_and_the_field(fleet_dir, tmp_path, capsys, content, expected):
    prev = tmp_path / "prev.json"
    prev.write_bytes(content)
    for argv in commands(fleet_dir, "--previous", prev, tmp_path):
        run_fails(argv, capsys, f"previous placement {prev}", expected)


@pytest.mark.parametrize("content", ['{"a": {"p1": -1}}', '{"a": {"p1": 1.5}}', '{"a": {"p1": true}}',
                                     '{"a": [1]}', "[]"])
def test_observed_counts_follow_one_rule_in_plan_and_lint(fleet_dir, tmp_path, capsys, content):
    observed = tmp_path / "observed.json"
    observed.write_text(content)
    for argv in commands(fleet_dir, "--observed", observed, tmp_path):
        run_fails(argv, capsys, str(observed), '{"cluster": {"pool": 3}} with a whole, non-negative number')


def test_missing_input_files_are_named(fleet_dir, tmp_path, capsys):
    for option in ("--previous", "--observed", "--config"):
        for argv in commands(fleet_dir, option, tmp_path / "nope.json", tmp_path):
            run_fails(argv, capsys, "cannot read", str(tmp_path / "nope.json"), "No such file or directory")


def test_plan_json_is_compact_and_reads_back_as_previous(fleet_dir, tmp_path, capsys):
    assert main(["plan", str(fleet_dir), "--json"]) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and ", " not in out
    prev = tmp_path / "prev.json"
    prev.write_text(out)
    assert main(["plan", str(fleet_dir), "--json", "--previous", str(prev)]) == 0
    assert capsys.readouterr().out == out


def test_previous_processing_is_linear_when_scaling_down(monkeypatch):
    """20,000 kept replicas scaled to 1: the rule (most-loaded cluster, later name, highest
    index) is unchanged, and the work is counted, not timed: no replica is compared with
    another (the quadratic version removed each victim from a list by equality)."""
    compared = []
    monkeypatch.setattr(PlacedReplica, "__eq__", lambda self, other: compared.append(1) or self is other)
    retained = [PlacedReplica(f"m-{c}-{i}", i, f"c{c:03d}", {}) for c in range(200) for i in range(100)]
    shape = DeploymentShape("default", "m", 1, (), (), None, (), ())
    st = DeploymentState(shape, retained=list(retained),
                         charges={(r.cluster, r.index): [] for r in retained})
    scale_down(st)
    assert len(compared) == 0
    assert [(r.cluster, r.index) for r in st.retained] == [("c000", 0)]
    first = [(r.cluster, r.index) for r, _ in st.dropped[:3]]
    assert first == [("c199", 99), ("c198", 99), ("c197", 99)]
    assert len(st.charges) == 1


def test_scale_down_matches_the_rule_on_uneven_clusters():
    retained = [PlacedReplica(f"r{c}{i}", i, c, {}) for c, n in (("a", 3), ("b", 3), ("c", 1)) for i in range(n)]
    shape = DeploymentShape("default", "m", 2, (), (), None, (), ())
    st = DeploymentState(shape, retained=list(retained))
    scale_down(st)
    # loads a3 b3 c1: b (tie, later name) loses 2, then a (3 > b 2) loses 2, then a/b tie at 1...
    assert [(r.cluster, r.index) for r, _ in st.dropped] == [("b", 2), ("a", 2), ("b", 1), ("a", 1), ("c", 0)]
    assert sorted((r.cluster, r.index) for r in st.retained) == [("a", 0), ("b", 0)]


def test_plan_reads_a_previous_placement_of_many_deployments(fleet_dir, tmp_path, capsys):
    placement = FleetPlacement.from_json({"deployments": [
        {"namespace": "default", "name": f"d{i}", "replicas": []} for i in range(2000)]})
    assert placement.by_key()[("default", "d1999")].name == "d1999"
    prev = tmp_path / "prev.json"
    prev.write_text(json.dumps(placement.to_json()))
    assert main(["plan", str(fleet_dir), "--previous", str(prev)]) == 0
