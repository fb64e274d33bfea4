"""A fleet split across stacks on the real engine (render stack configuration): the fleet
stack plus its shard stacks write exactly what one stack writes, through the driver
`python -m modelplane up|preview|destroy` (issue 15 item 3)."""

from __future__ import annotations

import json

import pytest

from tests.engine.fleets import REPO, reference_placement, scaling_fleet
from tests.engine.test_render_stack import _cli_render, assert_same_objects, written

pytestmark = pytest.mark.engine


def _split(shard_size: int) -> dict:
    return {"modelplane:split": {"role": "fleet", "shardSize": shard_size}}


def _up_writes_what_one_stack_writes(es, example: str, tmp_path, *up_args: str) -> None:
    """`modelplane up` on a fleet stack and its shard stacks writes, cluster by cluster,
    exactly what `modelplane render` writes (which the one-stack render stack writes too,
    test_render_stack.py), and the fleet stack holds the placement and no Kubernetes object."""
    run = es.modelplane("up", *up_args)
    assert run.returncode == 0, run.stdout + run.stderr
    layout = es.stack.outputs()["layout"].value
    assert layout["shards"], layout
    for shard in layout["shards"]:
        assert f"{es.name}.{shard}: ok" in run.stdout, run.stdout
    assert_same_objects(written(es.render_dir), _cli_render(REPO / "examples" / example, tmp_path / "cli"))
    # the fleet stack holds the placement and no Kubernetes object
    fleet_types = {r["type"] for r in es.stack.export_stack().deployment["resources"]}
    assert "pulumi-python:dynamic/modelplane:FleetPlacement" in fleet_types
    assert not any(t.startswith("kubernetes:") for t in fleet_types), fleet_types


@pytest.mark.parametrize(("example", "shard_size"), [("aws", 1), ("byo", 2), ("dynamo", 1)])
def test_split_stacks_write_exactly_what_one_stack_writes(make_stack, tmp_path, example, shard_size):
    """One control plane in its own shard (byo, and kind below) or in the shard of the fleet
    cluster hosting it (aws: InferenceGateway clusterName); shards of two clusters (byo)."""
    es = make_stack(REPO / "examples" / example, _split(shard_size))
    _up_writes_what_one_stack_writes(es, example, tmp_path, "--parallel", "2")


def test_split_preview_up_and_destroy_of_kind_show_write_and_remove_every_shard(make_stack, tmp_path):
    """One kind split stack through its life (one stack's `up` serves three checks that each
    paid a full split `up` on their own, ~50 s apiece on a loaded 2-core machine): the preview
    shows every shard's changes before anything exists and writes nothing; `up` writes what one
    stack writes; `destroy --remove` removes every shard stack, its config file and its files."""
    es = make_stack(REPO / "examples" / "kind", _split(1))
    run = es.modelplane("preview")
    assert run.returncode == 0, run.stdout + run.stderr
    # the placement dry-run first: the table `modelplane plan` prints
    assert "ml-team/chat: 1 of 1 replicas placed" in run.stdout, run.stdout
    for shard, created in ((f"{es.name}.eu-west", "create"), (f"{es.name}.us-east", "create"),
                           (f"{es.name}.control", "create")):
        line = next((ln for ln in run.stdout.splitlines() if f"] {shard}: ok" in ln), "")
        assert created in line, run.stdout
    assert not es.render_dir.exists() or not any(es.render_dir.rglob("*.yaml")), "preview wrote manifests"

    _up_writes_what_one_stack_writes(es, "kind", tmp_path)
    assert any(es.render_dir.rglob("*.yaml"))   # so the destroy's check below cannot pass vacuously
    run = es.modelplane("destroy", "--remove")
    assert run.returncode == 0, run.stdout + run.stderr
    assert not any(es.render_dir.rglob("*.yaml"))
    assert not list((REPO / "stacks").glob(f"Pulumi.{es.name}.*.yaml")), "shard stack config files left behind"


def test_split_scaling_keeps_replicas_and_moves_objects_between_shard_stacks(make_stack, tmp_path):
    """2 -> 4 -> 3 replicas over alpha and beta, one shard stack each: every run equals
    `modelplane render` with the previous placement, and the victim's objects leave beta."""
    fleet_dir = scaling_fleet(tmp_path / "fleet", 2)
    es = make_stack(fleet_dir, _split(1))
    previous = None
    for replicas in (2, 4, 3):
        scaling_fleet(fleet_dir, replicas)
        run = es.modelplane("up")
        assert run.returncode == 0, run.stdout + run.stderr
        extra: list[str] = []
        if previous is not None:
            prev_file = tmp_path / f"previous-{replicas}.json"
            prev_file.write_text(json.dumps(previous.to_json()))
            extra = ["--previous", str(prev_file)]
        assert_same_objects(written(es.render_dir), _cli_render(fleet_dir, tmp_path / f"cli-{replicas}", *extra))
        reference = reference_placement(fleet_dir, previous)
        deployments = es.stack.outputs()["deployments"].value
        assert sorted((r["cluster"], r["index"]) for r in deployments["ml-team/chat"]["replicas"]) == \
            sorted((r.cluster, r.index) for r in reference.deployments[0].replicas)
        previous = reference


def _benchmark_fleet(directory, env_value: str | None = None):
    """6 clusters and 6 one-replica deployments of benchmarks/scale_fleet.py; `env_value`
    changes one deployment's engine container (one manifest, the placement unchanged)."""
    from benchmarks import scale_fleet

    docs = scale_fleet.fleet(6, 6, replicas=1)
    if env_value is not None:
        target = next(d for d in docs if d["kind"] == "ModelDeployment" and d["metadata"]["name"] == "model-0001")
        container = target["spec"]["template"]["spec"]["engines"][0]["members"][0]["template"]["spec"]["containers"][0]
        container["env"] = [{"name": "MAX_NUM_SEQS", "value": env_value}]
    for old in directory.glob("*.yaml"):
        old.unlink()
    scale_fleet.write(docs, directory)
    return directory


def _previewed(stdout: str, stack: str) -> str:
    return next((ln for ln in stdout.splitlines() if f"] {stack}: " in ln), "")


def test_split_preview_of_a_one_deployment_change_previews_only_the_shards_it_reaches(make_stack, tmp_path):
    """After `up`, one deployment's engine changes: the preview runs the fleet stack, the
    shard its replica is on and the control shard (which reads every manifest), and says
    the other shard stacks are unchanged by the plan diff without previewing them; a shard
    whose state cannot be read (its stack removed) is previewed, never skipped."""
    fleet_dir = _benchmark_fleet(tmp_path / "fleet")
    es = make_stack(fleet_dir, _split(2))
    run = es.modelplane("up", "--parallel", "2")
    assert run.returncode == 0, run.stdout + run.stderr
    outputs = es.stack.outputs()
    shards = outputs["layout"].value["shards"]
    changed = next(v for k, v in outputs["deployments"].value.items() if k.endswith("/model-0001"))
    hosts = {r["cluster"] for r in changed["replicas"]}
    reached = {s for s, clusters in shards.items() if hosts & set(clusters)} | {outputs["layout"].value["control"]}
    others = sorted(set(shards) - reached)
    assert reached and others, (shards, hosts)

    # nothing changed: every shard is unchanged, none previewed
    run = es.modelplane("preview")
    assert run.returncode == 0, run.stdout + run.stderr
    assert f"{len(shards)} of {len(shards)} shard stacks unchanged by the plan diff" in run.stdout, run.stdout
    assert not any(_previewed(run.stdout, f"{es.name}.{s}") for s in shards), run.stdout

    _benchmark_fleet(fleet_dir, env_value="17")
    run = es.modelplane("preview")
    assert run.returncode == 0, run.stdout + run.stderr
    assert f"{len(others)} of {len(shards)} shard stacks unchanged by the plan diff" in run.stdout, run.stdout
    for shard in others:
        assert not _previewed(run.stdout, f"{es.name}.{shard}"), run.stdout
        assert f"{es.name}.{shard}" in run.stdout   # named in the unchanged line
    for shard in reached:
        line = _previewed(run.stdout, f"{es.name}.{shard}")
        assert ": ok" in line, run.stdout
    replica_shard = next(s for s in reached if s != outputs["layout"].value["control"])
    assert "update" in _previewed(run.stdout, f"{es.name}.{replica_shard}"), run.stdout
    assert "its share, the manifests it reads or the program changed" in run.stdout

    # a shard whose state is gone: the diff cannot rule it out, so it is previewed
    gone = f"{es.name}.{others[0]}"
    es.stack.workspace.remove_stack(gone, force=True, preserve_config=True)
    run = es.modelplane("preview")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "create" in _previewed(run.stdout, gone), run.stdout
    assert f"{gone} (its state could not be read" in run.stdout, run.stdout
    for shard in others[1:]:
        assert not _previewed(run.stdout, f"{es.name}.{shard}"), run.stdout

    # --every-shard previews them all
    run = es.modelplane("preview", "--every-shard")
    assert run.returncode == 0, run.stdout + run.stderr
    assert all(": ok" in _previewed(run.stdout, f"{es.name}.{s}") for s in shards), run.stdout
