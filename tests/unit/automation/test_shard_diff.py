"""The plan diff of `python -m modelplane preview` on a split fleet (automation/split.py):
which shard stacks are previewed and why, and which are proven unchanged."""

from __future__ import annotations

from pathlib import Path

import pytest

from automation.split import AppliedShard, ShardDiff, applied_from, diff_shards

OK = AppliedShard("d1", "c1")


@pytest.mark.parametrize(("digest", "config", "record", "reshaped", "expected"), [
    ("d1", "c1", OK, False, None),                                     # same share, config, program
    ("d2", "c1", OK, False, "its share, the manifests it reads or the program changed"),
    ("d1", "c2", OK, False, "its config changed since it was applied"),
    ("d1", "c1", AppliedShard("d1", None), False, "its config changed since it was applied"),
    ("d1", "c1", None, False, "its state was not read"),
    ("d1", "c1", AppliedShard(unknown="it was never applied"), False, "it was never applied"),
    ("d1", "c1", AppliedShard(), False, "its last update recorded no applied digest"),
    (None, "c1", OK, False, "the fleet stack's preview gave no digest of its share"),
    ("d1", "c1", OK, True, "the fleet stack's preview creates, replaces or deletes resources"),
])
def test_a_shard_is_skipped_only_when_everything_it_applied_is_the_same(digest, config, record, reshaped, expected):
    diff = diff_shards({"prod.a": digest}, {"prod.a": config}, {"prod.a": record}, fleet_reshaped=reshaped)
    if expected is None:
        assert diff == ShardDiff({}, ["prod.a"])
    else:
        assert diff == ShardDiff({"prod.a": expected}, [])


def test_a_shard_missing_from_what_was_read_is_previewed_and_the_order_kept():
    diff = diff_shards({"p.c": "x", "p.a": "d1", "p.b": "d1"}, {"p.a": "c1", "p.b": "c1", "p.c": "c1"},
                       {"p.a": OK, "p.b": OK})
    assert diff.unchanged == ["p.a", "p.b"]
    assert diff.preview == {"p.c": "its state was not read"}


@pytest.mark.parametrize(("history", "outputs", "expected"), [
    ([], None, AppliedShard(unknown="it was never applied")),
    (None, None, AppliedShard(unknown="it was never applied")),
    ([{"kind": "update", "result": "failed"}], None,
     AppliedShard(unknown="its last operation was update (failed), not a successful update")),
    ([{"kind": "refresh", "result": "succeeded"}], None,
     AppliedShard(unknown="its last operation was refresh (succeeded), not a successful update")),
    (["garbage"], None, AppliedShard(unknown="its last operation was unknown (no result), not a successful update")),
    ([{"kind": "update", "result": "succeeded"}], {"gatewayUrls": {}}, AppliedShard()),
    ([{"kind": "update", "result": "succeeded"}], {"applied": "[secret]"}, AppliedShard()),
    ([{"kind": "update", "result": "succeeded"}], {"applied": {"inputs": "d1", "fromConfig": "c1"}}, OK),
    ([{"kind": "update", "result": "succeeded"}], {"applied": {"inputs": "d1"}}, AppliedShard("d1", None)),
])
def test_what_a_shard_applied_comes_from_its_last_successful_update_only(history, outputs, expected):
    assert applied_from(history, outputs) == expected


def test_the_summary_names_a_bounded_number_of_stacks_and_every_count():
    diff = ShardDiff({"p.s-000": "its state was not read"}, [f"p.s-{i:03d}" for i in range(1, 21)])
    text = diff.lines(3)
    assert text.startswith("20 of 21 shard stacks unchanged by the plan diff")
    assert "p.s-001, p.s-002, p.s-003 and 17 more" in text
    assert "previewing 1 of 21 shard stacks: p.s-000 (its state was not read)" in text
    assert ShardDiff({}, []).lines() == ""


def test_the_program_digest_covers_every_file_a_shards_objects_are_made_from() -> None:
    """A file the program renders from but the digest skips would let a changed program's
    shard pass as unchanged: the gateway plugins' Go sources (shipped in a ConfigMap to each
    gateway) and the `sim` package the components import were missed at first."""
    import components.sim
    import modelplane.render.gateway
    import sim.cluster
    from components.split import program_files
    from modelplane.gateway.security import PLUGIN_MODULE, PLUGINS_DIR
    from modelplane.render.gateway import plugin_files

    files = {f.resolve() for f in program_files()}
    shipped = {(PLUGINS_DIR / "src" / PLUGIN_MODULE / name).resolve() for name in plugin_files()}
    assert shipped and shipped <= files
    for module in (components.sim, modelplane.render.gateway, sim.cluster):
        assert module.__file__ is not None and Path(module.__file__).resolve() in files


def test_the_program_digest_names_every_pulumi_sdk_the_project_depends_on() -> None:
    """A shard's cloud resources (EKS, GKE) come from pulumi-aws and pulumi-gcp: an upgrade of
    either changes what a shard registers, so its version is in the digest (the policy SDK
    registers nothing)."""
    import re
    import tomllib

    from components.split import PROGRAM_DISTRIBUTIONS

    deps = tomllib.loads((Path(__file__).resolve().parents[3] / "pyproject.toml").read_text())["project"]
    names = {m.group(0) for d in deps["dependencies"] if (m := re.match(r"pulumi[a-z-]*", d))}
    assert names - {"pulumi-policy"} <= set(PROGRAM_DISTRIBUTIONS), names
