"""The real Pulumi engine on the `render` stack configuration (GitOps: every cluster's
Kubernetes provider writes YAML instead of applying it). Needs scripts/bootstrap-tools."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from modelplane.render.output import SERVING_STACK_DIRS
from tests.engine.fleets import REPO, reference_placement, scaling_fleet

pytestmark = pytest.mark.engine

KIND_EXAMPLE = REPO / "examples" / "kind"


def _table_lines(placement: Any) -> list[str]:
    """The placement table the program logs: `modelplane plan`'s (modelplane.scheduler.placement_report)."""
    from modelplane.scheduler.placement_report import format_table

    return [line.strip() for line in format_table(placement).splitlines() if line.strip()]


def _rendered(render_dir: Path, cluster: str) -> dict[tuple[str, str, str, str], dict]:
    """Objects the provider wrote for one cluster, keyed by (apiVersion, kind, namespace, name)."""
    out = {}
    for path in sorted((render_dir / cluster).rglob("*.yaml")):
        if path.relative_to(render_dir / cluster).parts[0] in SERVING_STACK_DIRS:
            continue    # the charts' release and values files, compared by _stack_files
        for obj in yaml.safe_load_all(path.read_text()):
            if not obj:
                continue
            meta = obj.get("metadata", {})
            out[(obj["apiVersion"], obj["kind"], meta.get("namespace", ""), meta["name"])] = obj
    return out


def _key(obj: dict) -> tuple[str, str, str, str]:
    meta = obj["metadata"]
    return obj["apiVersion"], obj["kind"], meta.get("namespace", ""), meta["name"]


def _normalize(value: Any) -> Any:
    return json.loads(json.dumps(value, sort_keys=True, default=str))


def _deployment_replicas(outputs: dict) -> dict[str, tuple[str, int]]:
    """replica name -> (cluster, index), from the `deployments` stack output."""
    reps = {}
    for dep in outputs["deployments"].value.values():
        for rep in dep["replicas"]:
            reps[rep["name"]] = (rep["cluster"], int(rep["index"]))
    return reps


EXAMPLES = sorted(p.name for p in (REPO / "examples").iterdir() if p.is_dir())
# Applied with secrets configured (test_secrets_reach_neither_the_written_files_nor_the_state_and_render_agrees),
# which also compares them with `modelplane render`: one `up` each, not two.
SECRET_EXAMPLES = ("aws", "byo")
# examples/byo has a ModelEndpoint whose API key is the secret `ml-team/together-key`.
SECRET_CANARIES = {"hfToken": "hf_enginetest_Render9Canary", "endpointApiKeys": "sk-enginetest-Render9Canary"}


def _cli_render(manifests: Path, out: Path, *extra: str) -> dict[str, dict[tuple[str, str, str, str], dict]]:
    from modelplane.__main__ import main

    assert main(["render", str(manifests), str(out), *extra]) == 0
    return {c.name: _rendered(out, c.name) for c in sorted(out.iterdir()) if c.is_dir()}


@pytest.mark.parametrize("example", [e for e in EXAMPLES if e not in SECRET_EXAMPLES])
def test_render_stack_writes_exactly_what_modelplane_render_writes(make_stack, tmp_path, example):
    """One cluster plan (issue 10 item 1): `pulumi up` on the render stack and `modelplane
    render` write the same objects for every cluster, in both directions, and the same serving
    stack files (charts, values, IAM: modelplane.render.gitops)."""
    es = make_stack(REPO / "examples" / example)
    result = es.stack.up(color="never")
    assert result.summary.result == "succeeded", result.stdout
    assert_same_objects(written(es.render_dir), _cli_render(REPO / "examples" / example, tmp_path / "cli"))
    assert _stack_files(es.render_dir) == _stack_files(tmp_path / "cli")


def _stack_files(out: Path) -> dict[str, str]:
    """Every serving stack file under OUT, by path relative to OUT."""
    return {str(p.relative_to(out)): p.read_text() for c in sorted(out.iterdir()) if c.is_dir()
            for top in SERVING_STACK_DIRS for p in sorted((c / top).rglob("*")) if p.is_file()}


def written(render_dir: Path) -> dict[str, dict[tuple[str, str, str, str], dict]]:
    """Every object the stack(s) wrote, per cluster directory."""
    return {c.name: _rendered(render_dir, c.name) for c in sorted(render_dir.iterdir()) if c.is_dir()}


def assert_same_objects(stack: dict[str, dict], cli: dict[str, dict]) -> None:
    """The same cluster directories, the same objects in each, equal after YAML parsing."""
    assert sorted(stack) == sorted(cli), "the two write different cluster directories"
    for cluster in cli:
        only_stack = sorted(set(stack[cluster]) - set(cli[cluster]))
        only_cli = sorted(set(cli[cluster]) - set(stack[cluster]))
        assert not only_stack and not only_cli, \
            f"{cluster}: only the stack wrote {only_stack}; only render wrote {only_cli}"
        for key, obj in cli[cluster].items():
            assert _normalize(stack[cluster][key]) == _normalize(obj), f"{cluster}: {key} differs"


def test_scaling_keeps_existing_replicas_and_removes_the_reference_victims(make_stack, tmp_path):
    fleet_dir = scaling_fleet(tmp_path / "fleet", 2)
    es = make_stack(fleet_dir)

    def up(replicas: int) -> dict[str, tuple[str, int]]:
        scaling_fleet(fleet_dir, replicas)
        result = es.stack.up(color="never")
        assert result.summary.result == "succeeded", result.stdout
        return _deployment_replicas(result.outputs)

    two = up(2)
    ref2 = reference_placement(fleet_dir)
    assert two == {r.name: (r.cluster, r.index) for r in ref2.deployments[0].replicas}
    assert sorted(two.values()) == [("alpha", 0), ("beta", 0)]

    four = up(4)
    for name, where in two.items():
        assert four.get(name) == where, f"replica {name} moved or was renamed: {where} -> {four.get(name)}"
    assert len(four) == 4
    ref4 = reference_placement(fleet_dir, ref2)
    assert four == {r.name: (r.cluster, r.index) for r in ref4.deployments[0].replicas}

    three = up(3)
    ref3 = reference_placement(fleet_dir, ref4)
    victims = set(four) - {r.name for r in ref3.deployments[0].replicas}
    assert set(four) - set(three) == victims
    # The reference's rule (semantics §2.7): most-loaded cluster, later name, highest index -> beta#1.
    assert [four[v] for v in victims] == [("beta", 1)]
    for name, where in three.items():
        assert four[name] == where
    written = _rendered(es.render_dir, "beta")
    gone = [k for k in written if any(v in k[3] for v in victims)]
    assert not gone, f"scaled-down replica still rendered: {gone}"


def test_preview_shows_the_placement_and_the_policy_pack_passes_clean_manifests_and_fails_violating_ones(
        make_stack):
    """A fresh stack's preview (with the policy pack: one preview serves both checks) shows every
    replica's cluster and pool, as `modelplane plan`'s table, before anything exists, and writes
    nothing; the pack passes examples/kind and fails examples/silent-failures on every silent failure."""
    from pulumi import automation as auto

    pack = str(REPO / "policy-packs" / "modelplane")
    clean = make_stack(KIND_EXAMPLE)
    result = clean.stack.preview(color="never", policy_packs=[pack])
    placement = reference_placement(KIND_EXAMPLE)
    assert any(d.replicas for d in placement.deployments), "examples/kind should place at least one replica"
    shown = {line.strip() for line in result.stdout.splitlines()}
    missing = [line for line in _table_lines(placement) if line not in shown]
    assert not missing, f"preview lacks placement table lines {missing}\n{result.stdout}"
    assert result.change_summary.get("create", 0) > 0
    assert not clean.render_dir.exists() or not any(clean.render_dir.rglob("*.yaml")), "preview wrote manifests"
    assert re.search(r"✅ modelplane@v\S+ \(local: .*policy-packs/modelplane\)", result.stdout), result.stdout
    assert "[mandatory]" not in result.stdout

    bad = make_stack(REPO / "examples" / "silent-failures")
    with pytest.raises(auto.errors.CommandError) as failed:
        bad.stack.preview(color="never", policy_packs=[pack])
    text = str(failed.value)
    assert re.search(r"❌ modelplane@v\S+", text), text
    failed_policies = set(re.findall(r"\[mandatory\]\s+(\S+)", text))
    # examples/silent-failures carries one document per silent failure (docs/policies.md)
    assert {"usable-gpu-memory", "replicas-fully-scheduled", "secrets"} <= failed_policies, failed_policies
    assert not bad.render_dir.exists() or not any(bad.render_dir.rglob("*.yaml"))


@pytest.mark.parametrize("example", SECRET_EXAMPLES)
def test_secrets_reach_neither_the_written_files_nor_the_state_and_render_agrees(make_stack, tmp_path, example):
    """With the hfToken and an endpoint's API key configured as Pulumi secrets, one `up`:
    * no written file holds a secret's value, base64 included (issue 9 item 4b: GitOps output is
      committed; the objects reference Secrets the user creates instead), and it says so;
    * `pulumi stack export`, as a person runs it, and the stack's config file hold them only
      encrypted (byo: its ModelEndpoint's key reaches a resource, so the state has a ciphertext);
    * the stack writes exactly what `modelplane render` writes (the secrets change no object)."""
    import base64

    from pulumi import automation as auto

    es = make_stack(REPO / "examples" / example)
    es.stack.set_config("modelplane:hfToken", auto.ConfigValue(SECRET_CANARIES["hfToken"], secret=True))
    es.stack.set_config("modelplane:endpointApiKeys", auto.ConfigValue(
        json.dumps({"ml-team/together-key": SECRET_CANARIES["endpointApiKeys"]}), secret=True))
    result = es.stack.up(color="never")
    assert result.summary.result == "succeeded", result.stdout

    files = [p for p in es.render_dir.rglob("*") if p.is_file()]
    assert files
    for path in files:
        text = path.read_text(errors="replace")
        assert "kind: Secret" not in text, f"{path} is a Secret"
        for canary in SECRET_CANARIES.values():
            assert canary not in text and base64.b64encode(canary.encode()).decode() not in text, path
    assert "never written" in result.stdout

    exported = es.export_text()
    if example == "byo":
        assert "ciphertext" in exported, "no encrypted secret in the state: the canaries never reached a resource"
    for canary in SECRET_CANARIES.values():
        assert canary not in exported, f"secret {canary[:12]}... is in plain text in `pulumi stack export`"
        assert canary not in json.dumps(json.loads(exported))  # nor hidden behind JSON escaping
        assert canary not in es.config_file.read_text()

    assert_same_objects(written(es.render_dir), _cli_render(REPO / "examples" / example, tmp_path / "cli"))
    assert _stack_files(es.render_dir) == _stack_files(tmp_path / "cli")


def test_program_errors_are_clean_and_name_the_manifest(make_stack, tmp_path):
    """Issue 9 item 4: no exception of ours reaches Pulumi as "unhandled": an invalid
    manifest and a fleet the program refuses both fail the preview with one clean error
    naming the manifest file."""
    from pulumi import automation as auto

    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "fleet.yaml").write_text("apiVersion: modelplane.ai/v1alpha1\nkind: ModelDeployment\n"
                                    "metadata: {name: x}\nspec: {}\n")
    refused = tmp_path / "refused"
    scaling_fleet(refused, 1)
    (refused / "gateway.yaml").write_text(
        # callers a service allows, on a gateway that authenticates nobody: refused by the plan
        "apiVersion: modelplane.ai/v1alpha1\nkind: ModelService\nmetadata: {name: refused-chat, namespace: default}\n"
        "spec: {allowedCallers: [alice], endpoints: [{selector: {matchLabels: {app: x}}}]}\n")
    for manifests, where in ((bad, "fleet.yaml"), (refused, "gateway.yaml#0")):
        es = make_stack(manifests)
        with pytest.raises(auto.errors.CommandError) as failed:
            es.stack.preview(color="never")
        text = str(failed.value)
        assert where in text, text
        assert "unhandled exception" not in text and "Traceback" not in text, text


def test_python_language_host_prints_a_run_error_from_an_apply_without_a_traceback(engine_env, tmp_path):
    """Rule: the Python language host reports a `pulumi.RunError` as its message alone and
    any other exception as "Program failed with an unhandled exception" with a traceback
    (sdk/python/cmd/pulumi-language-python-exec: `except pulumi.RunError as e:
    pulumi.log.error(str(e))`; checked with the search tool and in the built v3.274.1).
    components.errors.ResourceError is a RunError, and the program raises it inside the
    placement's apply too, where plan errors surface."""
    import subprocess

    (tmp_path / "Pulumi.yaml").write_text(
        f"name: applyerr\nruntime:\n  name: python\n  options:\n    virtualenv: {REPO / '.venv'}\n")
    program = ("import pulumi\nimport sys\nsys.path.insert(0, {repo!r})\n"
               "from components.errors import ResourceError\n"
               "root = pulumi.ComponentResource('t:index:Root', 'root')\n"
               "def refuse(_):\n    raise {error}\n"
               "root.register_outputs({{'r': pulumi.Output.from_input('x').apply(refuse)}})\n")
    env = {**engine_env, "PULUMI_BACKEND_URL": f"file://{tmp_path / 'state'}", "PULUMI_HOME": str(tmp_path / "home"),
           "PULUMI_CONFIG_PASSPHRASE": "applyerr"}
    (tmp_path / "state").mkdir()

    def preview(error: str) -> str:
        (tmp_path / "__main__.py").write_text(program.format(repo=str(REPO), error=error))
        run = subprocess.run(["pulumi", "preview", "--non-interactive", "--stack", "t"], cwd=tmp_path, env=env,
                             capture_output=True, text=True, timeout=300)
        assert run.returncode != 0
        return run.stdout + run.stderr

    init = subprocess.run(["pulumi", "stack", "init", "t", "--non-interactive"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert init.returncode == 0, init.stderr
    subprocess.run(["pulumi", "config", "set", "applyerr:unused", "x", "--stack", "t"], cwd=tmp_path, env=env,
                   capture_output=True, text=True, timeout=120, check=True)
    clean = preview("ResourceError('examples/x/fleet.yaml#2: refused', root)")
    assert "error: examples/x/fleet.yaml#2: refused" in clean
    assert "Traceback" not in clean and "unhandled exception" not in clean, clean
    raw = preview("ValueError('examples/x/fleet.yaml#2: refused')")
    assert "Program failed with an unhandled exception" in raw and "Traceback" in raw
