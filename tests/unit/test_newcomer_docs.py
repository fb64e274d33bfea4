"""The README and the docs a newcomer follows (issue 32, item 9): their commands run verbatim, their
links lead somewhere, the glossary has the words the output uses, and the first cloud fleets of
docs/sim-to-cloud.md plan and pass lint."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCS = sorted((REPO / "docs").glob("*.md"))
# Commands that need nothing but the files (no process of their own, no cluster, no network).
OFFLINE = re.compile(r"^\.venv/bin/(modelplane|python -m modelplane) (plan|explain|lint|render|completion) ")
# The exit code a command is documented to end with, by what it runs.
EXPECTED_CODE = {"lint examples/silent-failures": 1}


def shell_blocks(path: Path) -> list[str]:
    """Every line of the ```sh blocks of a Markdown file, continuation lines joined."""
    lines, inside, pending = [], False, ""
    for line in path.read_text().splitlines():
        if line.startswith("```"):
            inside = line.strip() in ("```sh", "```bash")
            continue
        if not inside:
            continue
        line = pending + line.strip()
        pending = ""
        if line.endswith("\\"):
            pending = line[:-1] + " "
            continue
        if line and not line.startswith("#"):
            lines.append(line)
    return lines


def offline_commands(path: Path) -> list[str]:
    return [c for c in shell_blocks(path) if OFFLINE.match(c) or c.startswith(("for i in ", "mkdir -p "))]


def _workdir(tmp_path: Path) -> Path:
    """A directory with the repository's examples and .venv in it: what the commands read, with
    what they write (plan.json, out/, placement.html) kept out of the working tree."""
    work = tmp_path / "clone"
    work.mkdir()
    for name in ("examples", ".venv", "scripts"):
        (work / name).symlink_to(REPO / name)
    return work


def _expected(command: str) -> int:
    return next((code for key, code in EXPECTED_CODE.items() if key in command), 0)


@pytest.mark.parametrize("doc", ["README.md", "docs/cli.md", "docs/tour.md"])
def test_the_offline_commands_run_verbatim(doc, tmp_path):
    work = _workdir(tmp_path)
    commands = offline_commands(REPO / doc)
    assert commands, f"{doc} has no offline command: the pattern no longer matches it"
    for command in commands:
        # HOME too is a temp directory: a command that saves a file there (a completion script) saves it here.
        proc = subprocess.run(["bash", "-c", command], cwd=work, capture_output=True, text=True, timeout=120,
                              env={**os.environ, "NO_COLOR": "1", "HOME": str(tmp_path)})
        assert proc.returncode == _expected(command), f"{doc}: `{command}` exited {proc.returncode}: {proc.stderr}"
        assert "Traceback" not in proc.stderr


def test_readme_names_only_what_exists():
    commands = shell_blocks(REPO / "README.md")
    makefile = (REPO / "Makefile").read_text()
    for command in commands:
        first = command.split()[0]
        if first == "make":
            assert re.search(rf"^{command.split()[1]}:", makefile, re.M), command
        for path in re.findall(r"\b((?:examples|scripts)/[\w./-]+)", command):
            assert (REPO / path.rstrip("/")).exists(), f"README: `{command}` names {path}"
    demos = [c for c in commands if c.startswith(".venv/bin/") and " demo " in c]
    assert demos and all((REPO / c.split(" demo ")[1].split()[0]).is_dir() for c in demos)


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    out, inside = set(), False
    for line in path.read_text().splitlines():
        if line.startswith("```"):
            inside = not inside
        elif not inside and re.match(r"^#{1,6} ", line):
            out.add(_slug(line.lstrip("#")))
    return out


@pytest.mark.parametrize("doc", [REPO / "README.md", *DOCS], ids=lambda p: p.name)
def test_every_relative_link_leads_somewhere(doc):
    text = re.sub(r"```.*?```", "", doc.read_text(), flags=re.S)
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"^[a-z]+://|^mailto:", target):
            continue
        file, _, anchor = target.partition("#")
        path = (doc.parent / file).resolve() if file else doc
        assert path.exists(), f"{doc.name}: link to {target}: no {path}"
        if anchor and path.suffix == ".md":
            assert anchor in _anchors(path), f"{doc.name}: link to {target}: no such heading in {path.name}"


def test_the_glossary_defines_the_words_the_output_uses():
    text = (REPO / "docs" / "glossary.md").read_text()
    defined = set(re.findall(r"^\| \*\*([\w ]+)\*\* \|", text, re.M))
    assert {"accounting", "ledger", "member", "copy", "gang", "fabric", "hop", "shard", "tier"} <= defined


def test_the_first_cloud_fleets_plan_and_pass_lint(tmp_path):
    text = (REPO / "docs" / "sim-to-cloud.md").read_text()
    fleets = re.findall(r"```yaml\n# (my-fleet/\w+/fleet\.yaml)[^\n]*\n(.*?)```", text, re.S)
    assert [f for f, _ in fleets] == ["my-fleet/aws/fleet.yaml", "my-fleet/gcp/fleet.yaml"]
    work = _workdir(tmp_path)
    for file, body in fleets:
        (work / file).parent.mkdir(parents=True)
        (work / file).write_text(body)
    guide = [c.split("#")[0].strip() for c in shell_blocks(REPO / "docs" / "sim-to-cloud.md")
             if OFFLINE.match(c) and "my-fleet" in c]
    assert guide == [".venv/bin/modelplane plan my-fleet/aws", ".venv/bin/modelplane lint my-fleet/aws"]
    for cloud in ("aws", "gcp"):
        plan = subprocess.run([".venv/bin/modelplane", "plan", f"my-fleet/{cloud}"], cwd=work, capture_output=True,
                              text=True, timeout=120)
        assert plan.returncode == 0 and "ml-team/qwen: 1 of 1 replicas placed" in plan.stdout, plan.stderr
        lint = subprocess.run([".venv/bin/modelplane", "lint", f"my-fleet/{cloud}", "-o", "wide"], cwd=work,
                              capture_output=True, text=True, timeout=120)
        assert lint.returncode == 0, lint.stdout
        assert [line.split(":")[0] for line in lint.stdout.splitlines()[:-1]] == ["[advisory] gateway-exposed"]
