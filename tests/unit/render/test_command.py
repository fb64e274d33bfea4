"""`python -m modelplane render MANIFEST_DIR OUT_DIR`."""

import argparse
import json

import yaml

from modelplane.commands import render as command
from modelplane.render.output import file_names

from .fleets import CACHES, GANG, PLATFORM, RESEARCH_CACHE, STANDALONE


def _run(*argv):
    parser = argparse.ArgumentParser()
    command.add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["render", *argv])
    assert args.func is command.run
    return args.func(args)


def _manifests(tmp_path):
    src = tmp_path / "fleet"
    src.mkdir()
    (src / "platform.yaml").write_text(PLATFORM)
    (src / "models.yaml").write_text("\n---\n".join([CACHES, RESEARCH_CACHE, STANDALONE, GANG]))
    return src


def _tree(root):
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*.yaml"))}


def test_writes_one_object_per_file_per_cluster(tmp_path, capsys):
    out = tmp_path / "out"
    assert _run(str(_manifests(tmp_path)), str(out)) == 0
    tree = _tree(out)
    assert tree
    for path, data in tree.items():
        if path.split("/")[1] in ("charts", "cloud"):    # the serving stack's files: test_gitops.py
            continue
        cluster, name = path.split("/")
        docs = list(yaml.safe_load_all(data))
        assert len(docs) == 1
        obj = docs[0]
        kind, meta = obj["kind"].lower(), obj["metadata"]
        # the namespace joins the file name only when two namespaces share an object name
        assert name in (f"{kind}-{meta['name']}.yaml", f"{kind}-{meta.get('namespace')}-{meta['name']}.yaml")
        if obj["kind"] != "Namespace" and "modelplane.ai/cluster" in obj["metadata"]["labels"]:
            assert obj["metadata"]["labels"]["modelplane.ai/cluster"] == cluster
        # keys keep the renderer's order: apiVersion, kind, metadata, spec
        assert list(obj)[:3] == ["apiVersion", "kind", "metadata"]
    printed = capsys.readouterr().out
    assert "ml-team/chat: 2 of 2 replicas placed" in printed
    assert "wrote" in printed


def test_output_is_byte_stable_and_stale_files_go(tmp_path):
    src, out = _manifests(tmp_path), tmp_path / "out"
    assert _run(str(src), str(out)) == 0
    first = _tree(out)
    stale = out / "kind-a" / "deployment-gone.yaml"
    stale.write_text("kind: Deployment\n")
    assert _run(str(src), str(out)) == 0
    assert _tree(out) == first


def test_previous_and_accounting_are_accepted(tmp_path):
    src, out = _manifests(tmp_path), tmp_path / "out"
    previous = tmp_path / "previous.json"
    previous.write_text(json.dumps({"deployments": []}))
    assert _run(str(src), str(out), "--previous", str(previous), "--accounting", "Node") == 0


def test_invalid_manifests_exit_2_on_stderr(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: modelplane.ai/v1alpha1\nkind: ModelDeployment\nmetadata: {name: x}\nspec: {}\n")
    assert _run(str(bad), str(tmp_path / "out")) == 2
    err = capsys.readouterr().err
    assert "error" in err
    assert not (tmp_path / "out").exists()


def test_unreadable_previous_exits_2(tmp_path, capsys):
    previous = tmp_path / "previous.json"
    previous.write_text("{not json")
    assert _run(str(_manifests(tmp_path)), str(tmp_path / "out"), "--previous", str(previous)) == 2
    assert "previous placement" in capsys.readouterr().err


def test_dangling_cache_reference_exits_2(tmp_path, capsys):
    src = tmp_path / "fleet"
    src.mkdir()
    (src / "all.yaml").write_text(PLATFORM + "\n---\n" + STANDALONE)
    assert _run(str(src), str(tmp_path / "out")) == 2
    assert "qwen" in capsys.readouterr().err


def test_render_errors_exit_2_and_write_nothing(tmp_path, capsys, monkeypatch):
    import modelplane.commands.render as render_command
    from modelplane.render import RenderError

    def refuse(*_args, **_kwargs):
        raise RenderError("ModelCache ml-team/qwen cannot be staged on InferenceCluster vultr-f")

    monkeypatch.setattr(render_command, "plan_fleet", refuse)
    out = tmp_path / "out"
    assert _run(str(_manifests(tmp_path)), str(out)) == 2
    assert "vultr-f" in capsys.readouterr().err
    assert not out.exists()


def test_file_names_disambiguate_same_name_in_two_namespaces():
    objs = [{"kind": "Service", "metadata": {"name": "r", "namespace": "a"}},
            {"kind": "Service", "metadata": {"name": "r", "namespace": "b"}},
            {"kind": "Namespace", "metadata": {"name": "a"}}]
    assert file_names(objs) == ["service-a-r.yaml", "service-b-r.yaml", "namespace-a.yaml"]


def test_a_cluster_that_left_the_fleet_loses_its_directory(tmp_path):
    """Issue 9 (low): `render` left a removed cluster's old folder behind."""
    src, out = _manifests(tmp_path), tmp_path / "out"
    assert _run(str(src), str(out)) == 0
    assert (out / "vultr-f").is_dir() and (out / "kind-a").is_dir()
    mine = out / "README.md"  # what OUT holds besides cluster directories stays
    mine.write_text("GitOps repository\n")
    vultr = PLATFORM.index("apiVersion: modelplane.ai/v1alpha1\nkind: InferenceCluster\nmetadata: {name: vultr-f")
    (src / "platform.yaml").write_text(PLATFORM[:vultr])
    assert _run(str(src), str(out)) == 0
    assert not (out / "vultr-f").exists()
    assert (out / "kind-a").is_dir() and mine.read_text() == "GitOps repository\n"
    assert not list(out.glob(".modelplane-render-*")), "staging directory left behind"


def test_a_failure_while_writing_leaves_the_previous_output_whole(tmp_path, monkeypatch):
    """Issue 9 (low): a failed `render` left partial output; now it writes to a staging
    directory and swaps it in only when everything was written."""
    import modelplane.render.output as output

    src, out = _manifests(tmp_path), tmp_path / "out"
    assert _run(str(src), str(out)) == 0
    before = _tree(out)
    (src / "models.yaml").write_text("\n---\n".join([CACHES, RESEARCH_CACHE, GANG]))  # chat is gone
    calls = {"n": 0}
    real = output.to_yaml

    def fail_midway(obj):
        calls["n"] += 1
        if calls["n"] == 7:
            raise OSError(28, "No space left on device")
        return real(obj)

    monkeypatch.setattr(output, "to_yaml", fail_midway)
    assert _run(str(src), str(out)) == 2
    assert _tree(out) == before
    assert not list(out.glob(".modelplane-render-*")), "staging directory left behind"
    # into a directory that did not exist: nothing at all is left
    calls["n"] = 0
    assert _run(str(src), str(tmp_path / "new")) == 2
    assert not (tmp_path / "new").exists()
