"""The `modelplane` console script as `pip install` installs it (issue 32, item 5): its own name in
usage lines, each command's own usage on a flag it does not know, and shell completion generated
from the same parsers."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CLI = REPO / ".venv" / "bin" / "modelplane"


def cli(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(CLI), *argv], cwd=REPO, capture_output=True, text=True, timeout=120)


def test_the_console_script_is_installed_by_pip():
    assert CLI.exists(), "pip install -e . installs the `modelplane` console script (pyproject.toml)"
    proc = cli("--help")
    assert proc.returncode == 0
    assert proc.stdout.startswith("usage: modelplane [-h] COMMAND ...")
    for command in ("plan", "render", "lint", "verify", "demo", "split", "completion"):
        assert f"    {command}" in proc.stdout


@pytest.mark.parametrize("argv", [
    ["plan", "examples/kind", "--bogus"],
    ["lint", "examples/kind", "--jsno"],
    ["render", "examples/kind", "out", "--previus", "x"],
    ["verify", "examples/kind", "--placement", "p.json", "--observe", "d", "--wiat", "1"],
    ["demo", "examples/kind", "-x"],
    ["split", "http://127.0.0.1:1/x", "--requets", "3"],
])
def test_a_bad_flag_prints_the_commands_own_usage(argv):
    proc = cli(*argv)
    assert proc.returncode == 2
    command = argv[0]
    assert proc.stderr.startswith(f"usage: modelplane {command} "), proc.stderr
    assert f"modelplane {command}: error: unrecognized arguments: " in proc.stderr


def test_python_dash_m_names_itself_so():
    proc = subprocess.run([str(REPO / ".venv" / "bin" / "python"), "-m", "modelplane", "plan", "x", "--bogus"],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stderr.startswith("usage: python -m modelplane plan ")


def _complete(script: Path, *words: str) -> list[str]:
    """What bash offers for the last of `words`, through the generated completion function."""
    quoted = " ".join(f"'{w}'" for w in words)
    program = (f"source {script}; COMP_WORDS=({quoted}); COMP_CWORD={len(words) - 1}; "
               f"COMP_LINE=\"${{COMP_WORDS[*]}}\"; COMP_POINT=${{#COMP_LINE}}; _shtab_modelplane; "
               "printf '%s\\n' \"${COMPREPLY[@]}\"")
    proc = subprocess.run(["bash", "-c", program], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.split()


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
def test_bash_completion_completes_commands_flags_choices_and_paths(tmp_path):
    proc = cli("completion", "bash")
    assert proc.returncode == 0
    script = tmp_path / "modelplane.bash"
    script.write_text(proc.stdout)
    assert _complete(script, "modelplane", "pl") == ["plan"]
    assert _complete(script, "modelplane", "plan", "--acc") == ["--accounting"]
    assert _complete(script, "modelplane", "plan", "--accounting", "") == ["Device", "Node"]
    assert "examples" in _complete(script, "modelplane", "plan", "exa")
    assert sorted(_complete(script, "modelplane", "completion", "")) == ["bash", "tcsh", "zsh"]


@pytest.mark.parametrize(("shell", "marker"), [("zsh", "#compdef modelplane"), ("tcsh", "complete modelplane")])
def test_zsh_and_tcsh_scripts(shell, marker):
    proc = cli("completion", shell)
    assert proc.returncode == 0 and marker in proc.stdout
