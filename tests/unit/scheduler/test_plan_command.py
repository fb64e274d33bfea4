"""`python -m modelplane plan`: output, --json, --previous, --accounting, exit codes."""

import argparse
import json
from pathlib import Path

import pytest

from modelplane.commands import plan as plan_cmd

from .helpers import H100, cluster, deployment, engine, pool, standalone, to_yaml


def run(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    plan_cmd.add_parser(parser.add_subparsers())
    args = parser.parse_args(["plan", *argv])
    return args.func(args)


@pytest.fixture
def fleet_dir(tmp_path: Path) -> Path:
    d = tmp_path / "fleet"
    d.mkdir()
    (d / "platform.yaml").write_text(to_yaml([H100, cluster("a", pool("p1", "h100", 2)),
                                              cluster("b", pool("p1", "h100", 1))]))
    (d / "models.yaml").write_text(to_yaml([deployment("m", 4),
                                            deployment("big", 1, engine("main", standalone(gpus=2)))]))
    return d


def test_table_output(fleet_dir, capsys) -> None:
    assert run([str(fleet_dir)]) == 0
    out = capsys.readouterr().out
    assert "default/m: 3 of 4 replicas placed" in out
    assert "ReplicasScheduled=False PartialCapacity: Scheduled 3 of 4 replicas" in out
    assert "main->p1" in out
    assert "unplaced replica #3:" in out and "a: engine main: short by 1 device in pool p1" in out
    assert "matched too few devices" in out


def test_json_output_and_previous_round_trip(fleet_dir, tmp_path, capsys) -> None:
    assert run([str(fleet_dir), "--json", "--accounting", "Node"]) == 0
    first = json.loads(capsys.readouterr().out)
    assert [d["name"] for d in first["deployments"]] == ["big", "m"]
    m = first["deployments"][1]
    assert [(r["cluster"], r["index"]) for r in m["replicas"]] == [("a", 0), ("a", 1), ("b", 0)]
    prev = tmp_path / "prev.json"
    prev.write_text(json.dumps(first))
    assert run([str(fleet_dir), "--json", "--accounting", "Node", "--previous", str(prev)]) == 0
    assert json.loads(capsys.readouterr().out) == first


def test_observed_capacity(fleet_dir, tmp_path, capsys) -> None:
    obs = tmp_path / "observed.json"
    obs.write_text(json.dumps({"b": {"p1": 2}}))
    assert run([str(fleet_dir), "--json", "--observed", str(obs)]) == 0
    m = json.loads(capsys.readouterr().out)["deployments"][1]
    assert m["conditions"][0]["reason"] == "ReplicasCreated"


def test_invalid_manifests_exit_2(tmp_path, capsys) -> None:
    (tmp_path / "bad.yaml").write_text("apiVersion: modelplane.ai/v1alpha1\nkind: ModelDeployment\n"
                                       "metadata: {name: x}\nspec: {replicas: -1}\n")
    assert run([str(tmp_path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "error" in captured.err


@pytest.mark.parametrize("content", ["not json", '{"deployments": 3}'])
def test_invalid_previous_exits_2(fleet_dir, tmp_path, capsys, content) -> None:
    prev = tmp_path / "prev.json"
    prev.write_text(content)
    assert run([str(fleet_dir), "--previous", str(prev)]) == 2
    assert "error" in capsys.readouterr().err


def test_missing_previous_file_exits_2(fleet_dir, tmp_path, capsys) -> None:
    assert run([str(fleet_dir), "--previous", str(tmp_path / "nope.json")]) == 2
    assert "cannot read" in capsys.readouterr().err


EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def test_table_shows_policies(capsys) -> None:
    assert run([str(EXAMPLES / "policy-budget")]) == 0
    out = capsys.readouterr().out
    assert "WithinBudget=False BudgetExceeded: FleetBudget ml-team-gpus: a replica needs 2 devices" in out
    assert "unplaced replica #2: Blocked: FleetBudget ml-team-gpus: a replica needs 2 devices, 0 of 12 left" in out
    assert "FLEETBUDGET   MAX  USED  REFUSED  DEPLOYMENTS" in out
    assert "ml-team-gpus  12   12    1        ml-team/chat, ml-team/summarize" in out


def test_moves_through_previous_files(tmp_path, capsys) -> None:
    """The preference example driven through files, as the README tour does it; a
    replica marked "ready": false in --previous keeps the one it replaces."""
    d = EXAMPLES / "policy-preferences"
    docs = []
    for args in ([str(d), "--json", "--observed", str(d / "outage.json")], [str(d), "--json"], [str(d), "--json"]):
        if docs:
            (tmp_path / "prev.json").write_text(json.dumps(docs[-1]))
            args += ["--previous", str(tmp_path / "prev.json")]
        assert run(args) == 0
        docs.append(json.loads(capsys.readouterr().out))
    chat = docs[-1]["deployments"][0]
    assert chat["placementPolicy"]["returnStreak"] == 2
    (move,) = chat["placementPolicy"]["moves"]
    for r in chat["replicas"]:
        r["ready"] = r["name"] != move["to"]
    (tmp_path / "prev.json").write_text(json.dumps(docs[-1]))
    assert run([str(d), "--previous", str(tmp_path / "prev.json")]) == 0
    out = capsys.readouterr().out
    assert "ml-team/chat: 3 of 3 replicas placed (+1 moving back)" in out
    assert f"moving back: {move['from']} (cloud) -> {move['to']} (onprem)" in out
    assert "not kept" not in out


def test_malformed_policy_state_in_previous_is_an_input_error(tmp_path, capsys) -> None:
    prev = tmp_path / "prev.json"
    prev.write_text(json.dumps({"deployments": [{"namespace": "ml-team", "name": "chat", "replicas": [],
                                                 "placementPolicy": {"returnStreak": -1}}]}))
    assert run([str(EXAMPLES / "policy-preferences"), "--previous", str(prev)]) == 2
    assert "returnStreak" in capsys.readouterr().err


@pytest.fixture
def wide_fleet(tmp_path: Path) -> Path:
    """Eight full clusters and one drained: more clusters refuse alike than the summary names."""
    d = tmp_path / "wide"
    d.mkdir()
    clusters = [cluster(f"c-{i}", pool("p1", "h100", 1)) for i in range(8)]
    (d / "fleet.yaml").write_text(to_yaml([H100, *clusters, deployment("m", 10)]))
    return d


def test_the_plan_summarizes_the_refusals_and_explain_gives_every_clusters(wide_fleet, capsys) -> None:
    """Issue 31: the table names a refusal once with its count and three examples; `plan
    --explain DEPLOYMENT` is the per-cluster table of modelplane.explain, every cluster named."""
    assert run([str(wide_fleet)]) == 0
    out = capsys.readouterr().out
    assert "    8 clusters (device-fit InsufficientCapacity), e.g. c-0, c-1, c-2: engine main: short by 1 device " \
           "in pool p1" in out
    assert "c-7" not in out.split("unplaced replica #8")[1]
    assert run([str(wide_fleet), "--explain", "m"]) == 0
    explained = capsys.readouterr().out
    for i in range(8):
        assert f"cluster c-{i}: placed m-" in explained and "one more refused: engine main: short by 1 device" \
            in explained, explained
    assert run([str(wide_fleet), "--explain", "m", "-o", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [c["refusal"]["code"] for c in doc["clusters"]] == ["InsufficientCapacity"] * 8


def test_plan_explain_refuses_an_unknown_deployment_and_flags_it_does_not_combine_with(wide_fleet, capsys) -> None:
    assert run([str(wide_fleet), "--explain", "mm"]) == 2
    assert "no ModelDeployment 'mm'" in capsys.readouterr().err
    assert run([str(wide_fleet), "--explain", "m", "--observe", str(wide_fleet)]) == 2
    assert "--explain does not combine with --observe" in capsys.readouterr().err


def test_an_explanation_of_a_placement_made_without_explain_is_refused_not_wrong(wide_fleet) -> None:
    from modelplane.api import load_manifests
    from modelplane.explain import explain_deployment
    from modelplane.scheduler import place_fleet

    fleet = load_manifests(wide_fleet)
    with pytest.raises(ValueError, match=r"place_fleet\(\.\.\., explain=\{key\}\)"):
        explain_deployment(fleet, place_fleet(fleet), ("default", "m"))
    assert explain_deployment(fleet, place_fleet(fleet, explain={("default", "m")}), ("default", "m")).clusters
