"""Output people script and read (issue 32, items 4 and 5), through the installed console script:
`-` for stdin and stdout, `-o json|yaml|wide` on plan, lint, render and verify, lint's findings by
file and level, colour on a terminal only."""

from __future__ import annotations

import json
import os
import pty
import subprocess
from pathlib import Path

import pytest
import yaml

from modelplane.api import ManifestError, load_manifest_bytes
from modelplane.limits import MAX_MANIFEST_FILE_BYTES

REPO = Path(__file__).resolve().parents[2]
CLI = REPO / ".venv" / "bin" / "modelplane"
KIND = REPO / "examples" / "kind"
KIND_STREAM = (KIND / "platform.yaml").read_text() + "\n---\n" + (KIND / "models.yaml").read_text()


def cli(*argv: str, stdin: str | None = None, cwd: Path = REPO, env: dict[str, str] | None = None
        ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(CLI), *argv], cwd=cwd, input=stdin, capture_output=True, text=True, timeout=120,
                          env=env)


# -- `-`: stdin and stdout ----------------------------------------------------------------------

def test_plan_dash_reads_the_manifests_from_stdin():
    from_dir = cli("plan", "examples/kind", "-o", "json")
    from_stdin = cli("plan", "-", "-o", "json", stdin=KIND_STREAM)
    assert from_stdin.returncode == 0, from_stdin.stderr
    assert json.loads(from_stdin.stdout) == json.loads(from_dir.stdout)


@pytest.mark.parametrize(("stdin", "said"), [
    pytest.param("", "<stdin>: no manifests: the input is empty", id="empty"),
    pytest.param("apiVersion: v1\nkind: [\n", "<stdin>, line 3: not valid YAML",
                 id="broken-yaml"),
])
def test_plan_dash_refuses_bad_stdin_naming_it(stdin, said):
    proc = cli("plan", "-", stdin=stdin)
    assert proc.returncode == 2 and said in proc.stderr and "Traceback" not in proc.stderr


def test_stdin_is_bounded_like_a_file():
    with pytest.raises(ManifestError, match=f"larger than {MAX_MANIFEST_FILE_BYTES} bytes"):
        load_manifest_bytes(b"#" * (MAX_MANIFEST_FILE_BYTES + 1), "<stdin>")
    with pytest.raises(ManifestError, match="not UTF-8"):
        load_manifest_bytes(b"\xff\xfe", "<stdin>")


def test_render_to_dash_prints_a_yaml_stream_and_writes_no_directory(tmp_path):
    proc = cli("render", str(KIND), "-", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert list(tmp_path.iterdir()) == []                        # no directory named "-"
    objects = list(yaml.safe_load_all(proc.stdout))
    # The workload clusters' objects include their charts' Namespaces (lws, dra-example-driver)
    assert len(objects) == 29 and all(o["apiVersion"] and o["kind"] for o in objects)
    assert [line for line in proc.stdout.splitlines() if line.startswith("# cluster: ")] == [
        "# cluster: eu-west", "# cluster: us-east", "# cluster: control"]
    assert "ml-team/chat: 1 of 1 replicas placed" in proc.stderr   # the summary goes to stderr
    assert "not printed: the serving stack's charts/ and cloud/ files" in proc.stderr
    as_json = json.loads(cli("render", str(KIND), "-", "-o", "json", cwd=tmp_path).stdout)
    assert {c: len(v) for c, v in as_json["clusters"].items()} == {"eu-west": 12, "us-east": 12, "control": 5}


def test_render_from_stdin_and_not_both_dashes(tmp_path):
    proc = cli("render", "-", str(tmp_path / "out"), "-o", "json", stdin=KIND_STREAM)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    # 29 objects and each workload cluster's two charts (release.yaml and values.yaml each)
    assert doc["written"] == 37 and doc["clusters"]["control"]["objects"] == 5
    assert doc["clusters"]["eu-west"]["files"] == ["charts/01-lws/release.yaml", "charts/01-lws/values.yaml",
                                                   "charts/02-dra-example-driver/release.yaml",
                                                   "charts/02-dra-example-driver/values.yaml"]
    assert sorted(p.name for p in (tmp_path / "out").iterdir() if not p.name.startswith(".")) == [
        "control", "eu-west", "us-east"]
    both = cli("render", "-", "-", stdin=KIND_STREAM)
    assert both.returncode == 2 and "cannot both be -" in both.stderr


# -- -o json|yaml|wide ----------------------------------------------------------------------------

def test_plan_output_forms_carry_one_document():
    as_json = cli("plan", "examples/kind", "-o", "json")
    assert as_json.stdout == cli("plan", "examples/kind", "--json").stdout
    assert as_json.stdout.count("\n") == 1                         # compact, as --json always was
    assert yaml.safe_load(cli("plan", "examples/kind", "-o", "yaml").stdout) == json.loads(as_json.stdout)
    wide = cli("plan", "examples/kind", "-o", "wide").stdout.splitlines()
    header = next(line for line in wide if line.strip().startswith("REPLICA"))
    assert header.split() == ["REPLICA", "CLUSTER", "INDEX", "ENGINE->POOL", "CLAIMS", "ZONES"]
    assert any("mock[0]: 1x gpu.example.com" in line for line in wide)
    bad = cli("plan", "examples/kind", "-o", "xml")
    assert bad.returncode == 2 and "usage: modelplane plan" in bad.stderr and "invalid choice: 'xml'" in bad.stderr


@pytest.mark.parametrize("argv", [
    pytest.param(["plan", "examples/silent-failures"], id="plan"),
    pytest.param(["explain", "examples/silent-failures", "llama-pd"], id="explain"),
    pytest.param(["plan", "examples/autoscaling", "--metrics", "examples/autoscaling/metrics-surge.json"],
                 id="plan-metrics"),
])
def test_yaml_carries_the_json_document_where_replicas_are_refused(argv):
    """Refusal reasons are the scheduler's own objects until written: YAML writes them as text."""
    as_yaml = cli(*argv, "-o", "yaml")
    assert as_yaml.returncode == 0, as_yaml.stderr
    assert yaml.safe_load(as_yaml.stdout) == json.loads(cli(*argv, "-o", "json").stdout)


def test_verify_output_forms(tmp_path):
    placement = tmp_path / "placement.json"
    placement.write_text(cli("plan", "examples/kind", "-o", "json").stdout)
    (tmp_path / "kubeconfigs").mkdir()
    argv = ["verify", "-", "--placement", str(placement), "--observe", str(tmp_path / "kubeconfigs")]
    doc = yaml.safe_load(cli(*argv, "-o", "yaml", stdin=KIND_STREAM).stdout)
    as_json = cli(*argv, "-o", "json", stdin=KIND_STREAM)
    assert as_json.returncode == 1                                  # no cluster could be read
    assert json.loads(as_json.stdout) == doc and doc["ok"] is False
    assert [r["problems"] for r in doc["replicas"]] == [["cluster not observed (no kubeconfig)"]] * 2
    wide = cli(*argv, "-o", "wide", stdin=KIND_STREAM).stdout.splitlines()
    assert wide[0].split() == ["REPLICA", "DEPLOYMENT", "CLUSTER", "STATUS", "PODS", "INDEX", "PROBLEMS"]


# -- lint: by file and level, colour on a terminal only -------------------------------------------

def test_lint_groups_findings_by_file_then_level_with_the_detail_indented():
    proc = cli("lint", "examples/silent-failures")
    assert proc.returncode == 1
    lines = proc.stdout.splitlines()
    files = [line for line in lines if line and not line.startswith(" ")][:-1]   # the last is the summary
    assert files == ["examples/silent-failures/models.yaml", "examples/silent-failures/platform.yaml"]
    levels = [line.strip() for line in lines if line.startswith("  ") and not line.startswith("   ")]
    # platform.yaml's advisory: kind-node-digest on the bare (deadlocking) kindest/node tag
    assert levels == ["mandatory (5)", "advisory (1)", "mandatory (5)", "advisory (1)"]
    i = lines.index("    usable-gpu-memory  InferenceClass/h100 #0 spec.devices[0].capacity.memory")
    assert i > lines.index("examples/silent-failures/platform.yaml")
    assert lines[i + 1].startswith("        declares 80Gi for an NVIDIA H100 80GB")
    assert "\033[" not in proc.stdout                               # not a terminal: no colour
    assert lines[-1].endswith("checks: 10 mandatory, 2 advisory findings")


def test_lint_json_and_yaml_documents():
    doc = json.loads(cli("lint", "examples/silent-failures", "-o", "json").stdout)
    assert doc["summary"]["mandatory"] == 10 and doc["summary"]["advisory"] == 2
    first = next(f for f in doc["findings"] if f["policy"] == "usable-gpu-memory")
    assert (first["object"], first["file"], first["document"]) == (
        "InferenceClass/h100", "examples/silent-failures/platform.yaml", 0)
    assert yaml.safe_load(cli("lint", "examples/silent-failures", "-o", "yaml").stdout) == doc
    wide = cli("lint", "examples/silent-failures", "-o", "wide").stdout.splitlines()
    assert sum(line.startswith("[mandatory] ") for line in wide) == 10


def _on_a_terminal(*argv: str, env: dict[str, str]) -> str:
    """What the command prints when its stdout is a terminal (a pseudo-terminal here)."""
    leader, follower = pty.openpty()
    try:
        proc = subprocess.run([str(CLI), *argv], cwd=REPO, stdout=follower, stderr=subprocess.PIPE, env=env,
                              timeout=120)
        os.close(follower)
        follower = -1
        chunks = []
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:         # EIO: the writer closed and everything was read
                break
            if not chunk:
                break
            chunks.append(chunk)
        assert proc.returncode == 1, proc.stderr
        return b"".join(chunks).decode()
    finally:
        os.close(leader)
        if follower >= 0:
            os.close(follower)


def test_lint_colours_levels_on_a_terminal_unless_no_color():
    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"} | {"TERM": "xterm"}
    coloured = _on_a_terminal("lint", "examples/silent-failures", env=env)
    assert "\033[1;31mmandatory (5)\033[0m" in coloured and "\033[33madvisory (1)\033[0m" in coloured
    plain = _on_a_terminal("lint", "examples/silent-failures", env={**env, "NO_COLOR": "1"})
    assert "\033[" not in plain and "mandatory (5)" in plain
