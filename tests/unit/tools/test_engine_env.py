"""scripts/engine-env changes nothing in the user's shell but PATH and MODELPLANE_TOOLS_BIN; the
PULUMI_* settings live in scripts/engine/bin/pulumi, for the one command it runs (issue 32, item 3).

Run against a copy of the two scripts in a throwaway "repository" and a fake tools cache whose
`pulumi` prints the environment it was started with, so nothing here needs the real engine and
nothing is written into the working tree."""

from __future__ import annotations

import os
import shutil
import signal
import stat
import subprocess
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
# What the fake CLI prints: its own environment, NUL-separated.
FAKE_PULUMI = "#!/bin/sh\nenv -0\n"
SHELL_EXPORTS = {"MODELPLANE_TOOLS_BIN", "PATH"}


def _executable(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)


@pytest.fixture
def layout(tmp_path: Path) -> dict[str, Path]:
    """A repository with the two scripts and bootstrap-tools, and an empty tools cache."""
    repo = tmp_path / "clone"
    for script in ("scripts/engine-env", "scripts/bootstrap-tools", "scripts/engine/bin/pulumi"):
        (repo / script).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / script, repo / script)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    return {"repo": repo, "cache": tmp_path / "cache", "elsewhere": elsewhere, "tmp": tmp_path}


def _base_env(layout: dict[str, Path], path: str = "/usr/bin:/bin") -> dict[str, str]:
    keep = {k: v for k, v in os.environ.items() if not k.startswith(("PULUMI_", "MODELPLANE_"))}
    return {**keep, "PATH": path, "HOME": str(layout["tmp"]), "MODELPLANE_TOOLS_CACHE": str(layout["cache"])}


def _build_tools(layout: dict[str, Path], env: dict[str, str]) -> Path:
    """The fake built tools where bootstrap-tools says they belong, stamps included."""
    proc = subprocess.run(["python3", str(layout["repo"] / "scripts/bootstrap-tools"), "--print-bin-dir"],
                          env=env, capture_output=True, text=True, timeout=60, check=True)
    bin_dir = Path(proc.stdout.strip())
    for tool in ("pulumi-language-python", "pulumi-language-python-exec", "pulumi-resource-pulumi-python",
                 "pulumi-resource-kubernetes"):
        _executable(bin_dir / tool, "#!/bin/sh\nexit 0\n")
    _executable(bin_dir / "pulumi", FAKE_PULUMI)
    (bin_dir.parent / "stamps").mkdir()
    for stamp in ("pulumi", "shims", "pulumi-language-python", "pulumi-resource-kubernetes"):
        (bin_dir.parent / "stamps" / f"{stamp}.json").write_text("{}")
    return bin_dir


def _shell(layout: dict[str, Path], env: dict[str, str], command: str, cwd: Path) -> dict[str, str]:
    """Run `eval "$(scripts/engine-env)"; <command>` in bash; the environment `command` printed."""
    script = f'set -e; eval "$({layout["repo"] / "scripts/engine-env"})"; {command}'
    proc = subprocess.run(["bash", "-c", script], env=env, cwd=cwd, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return dict(kv.split("=", 1) for kv in proc.stdout.split("\0") if "=" in kv)


def test_engine_env_exports_no_pulumi_setting_to_the_shell(layout):
    env = _base_env(layout)
    bin_dir = _build_tools(layout, env)
    proc = subprocess.run([str(layout["repo"] / "scripts/engine-env")], env=env, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    exported = [line.split("=", 1)[0].removeprefix("export ") for line in proc.stdout.splitlines()
                if line.startswith("export ")]
    assert set(exported) == SHELL_EXPORTS
    shell = _shell(layout, env, "env -0", layout["elsewhere"])
    assert not [k for k in shell if k.startswith("PULUMI_")]
    assert shell["MODELPLANE_TOOLS_BIN"] == str(bin_dir)
    assert shell["PATH"].split(":")[0] == str(layout["repo"] / "scripts/engine/bin")
    # A second eval in the same shell does not put the wrapper on PATH twice.
    twice = _shell(layout, env, f'eval "$({layout["repo"] / "scripts/engine-env"})"; env -0', layout["elsewhere"])
    assert twice["PATH"].split(":").count(str(layout["repo"] / "scripts/engine/bin")) == 1


def test_wrapper_scopes_state_and_a_private_passphrase_to_the_clone(layout):
    env = _base_env(layout)
    bin_dir = _build_tools(layout, env)
    repo = layout["repo"]
    seen = _shell(layout, env, "pulumi stack ls", repo)
    state = repo / ".pulumi-state"
    assert seen["PULUMI_BACKEND_URL"] == f"file://{state}"
    passphrase = Path(seen["PULUMI_CONFIG_PASSPHRASE_FILE"])
    assert passphrase == state / "passphrase"
    assert stat.S_IMODE(passphrase.stat().st_mode) == 0o600
    secret = passphrase.read_text().strip()
    assert len(secret) >= 40 and secret != "modelplane-test"
    assert "PULUMI_CONFIG_PASSPHRASE" not in seen and "PULUMI_SKIP_CONFIRMATIONS" not in seen
    assert seen["PULUMI_HOME"] == str(bin_dir.parent / "pulumi-home")
    assert seen["PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION"] == "true"
    assert seen["PATH"].split(":")[0] == str(bin_dir)          # the plugins are found there
    # From a subdirectory the same state and the same passphrase: it is made once per clone.
    (repo / "examples").mkdir()
    again = _shell(layout, env, "pulumi stack ls", repo / "examples")
    assert again["PULUMI_BACKEND_URL"] == seen["PULUMI_BACKEND_URL"]
    assert passphrase.read_text().strip() == secret


@pytest.mark.parametrize(("mine", "expected"), [
    pytest.param({"PULUMI_BACKEND_URL": "https://api.pulumi.com"}, {"PULUMI_BACKEND_URL": "https://api.pulumi.com"},
                 id="my-backend-no-passphrase-file"),
    pytest.param({"PULUMI_CONFIG_PASSPHRASE": "mine"}, {"PULUMI_CONFIG_PASSPHRASE": "mine"},
                 id="my-passphrase"),
    pytest.param({"PULUMI_HOME": "/tmp/my-home", "PULUMI_SKIP_UPDATE_CHECK": "false"},
                 {"PULUMI_HOME": "/tmp/my-home", "PULUMI_SKIP_UPDATE_CHECK": "false"}, id="my-home"),
])
def test_wrapper_keeps_what_the_user_set(layout, mine, expected):
    env = _base_env(layout)
    _build_tools(layout, env)
    seen = _shell(layout, {**env, **mine}, "pulumi preview", layout["repo"])
    for key, value in expected.items():
        assert seen[key] == value
    if "PULUMI_BACKEND_URL" in mine or "PULUMI_CONFIG_PASSPHRASE" in mine:
        assert "PULUMI_CONFIG_PASSPHRASE_FILE" not in seen
        assert not (layout["repo"] / ".pulumi-state" / "passphrase").exists()


def test_a_command_that_reads_no_backend_makes_no_state(layout):
    """The Automation API runs `pulumi version` from wherever its caller is: no .pulumi-state there."""
    env = _base_env(layout)
    _build_tools(layout, env)
    seen = _shell(layout, env, "pulumi version", layout["repo"])
    assert "PULUMI_BACKEND_URL" not in seen and not (layout["repo"] / ".pulumi-state").exists()


def test_wrapper_outside_the_clone_sets_no_backend(layout):
    env = _base_env(layout)
    _build_tools(layout, env)
    seen = _shell(layout, env, "pulumi whoami", layout["elsewhere"])
    assert "PULUMI_BACKEND_URL" not in seen and "PULUMI_CONFIG_PASSPHRASE_FILE" not in seen
    assert not (layout["repo"] / ".pulumi-state").exists()


def test_a_pulumi_of_the_users_own_keeps_its_home(layout):
    """No built tools: engine-env wraps the `pulumi` already on PATH, and its wrapper leaves
    PULUMI_HOME (the user's ~/.pulumi, with their login) alone."""
    own = layout["tmp"] / "own-bin"
    _executable(own / "pulumi", FAKE_PULUMI)
    env = _base_env(layout, f"{own}:/usr/bin:/bin")
    seen = _shell(layout, env, "pulumi up", layout["repo"])
    assert seen["MODELPLANE_TOOLS_BIN"] == str(own)
    assert "PULUMI_HOME" not in seen and "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION" not in seen
    assert seen["PULUMI_BACKEND_URL"] == f"file://{layout['repo'] / '.pulumi-state'}"


def test_no_cli_at_all_is_said(layout):
    env = _base_env(layout)
    proc = subprocess.run([str(layout["repo"] / "scripts/engine-env")], env=env, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 1
    assert "run scripts/bootstrap-tools" in proc.stderr and proc.stdout == ""


# A fake CLI that does what the Kubernetes provider does on configure: writes a kubeconfig, with
# a credential in it, to a file in $TMPDIR that it never removes; then says its pid and TMPDIR.
LEAKY_PULUMI = """#!/bin/sh
printf 'users:\\n- user:\\n    token: s3cret\\n' > "$TMPDIR/kubeconfig1234567"
echo "$$ $TMPDIR" > "$REPORT.part" && mv "$REPORT.part" "$REPORT"
[ "$1" = wait ] && exec sleep 120
exit 0
"""


def _until(condition, what: str, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        assert time.monotonic() < deadline, f"after {timeout:.0f} s: {what}"
        time.sleep(0.05)
    return value


def _leaky_layout(layout: dict[str, Path]) -> tuple[dict[str, str], Path, Path]:
    outer = layout["tmp"] / "outer-tmp"
    outer.mkdir()
    report = layout["tmp"] / "report"
    env = {**_base_env(layout), "TMPDIR": str(outer), "REPORT": str(report)}
    bin_dir = _build_tools(layout, env)
    _executable(bin_dir / "pulumi", LEAKY_PULUMI)
    return env, outer, report


def test_what_the_provider_leaves_in_tmpdir_goes_when_pulumi_exits(layout):
    """pulumi-kubernetes writes each provider's kubeconfig (credentials included) to a file in
    TMPDIR on every configure and never removes it (pkg/provider/util.go writeKubeconfigToFile,
    called from Configure in pkg/provider/provider.go): CI's runs left 606 of them in /tmp. The
    wrapper gives each command a TMPDIR of its own, and nothing of it is left once the command is
    done."""
    env, outer, report = _leaky_layout(layout)
    script = f'set -e; eval "$({layout["repo"] / "scripts/engine-env"})"; pulumi preview'
    proc = subprocess.run(["bash", "-c", script], env=env, cwd=layout["repo"], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    _, run_tmp = report.read_text().split()
    assert Path(run_tmp).parent == outer                 # under the caller's TMPDIR, not beside it
    _until(lambda: not any(outer.iterdir()), f"{outer} still holds {sorted(p.name for p in outer.iterdir())}")


@pytest.mark.parametrize("how", ["SIGTERM", "SIGINT-to-the-group", "SIGHUP", "SIGKILL"])
def test_a_run_stopped_by_a_signal_leaves_no_tmpdir_either(layout, how):
    """The wrapper `exec`s pulumi, so a signal reaches pulumi once, as without it (a second ^C or
    SIGTERM makes pulumi terminate at once, without finishing its operations); the directory is
    removed by a watcher that outlives the signal, even SIGKILL."""
    env, outer, report = _leaky_layout(layout)
    script = f'set -e; eval "$({layout["repo"] / "scripts/engine-env"})"; exec pulumi wait'
    proc = subprocess.Popen(["bash", "-c", script], env=env, cwd=layout["repo"], start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        pid, _ = _until(lambda: report.exists() and report.read_text().split(), "the fake pulumi never started")
        assert int(pid) == proc.pid                       # exec: pulumi is the process the caller signals
        if how == "SIGINT-to-the-group":
            os.killpg(proc.pid, signal.SIGINT)
        else:
            os.kill(proc.pid, getattr(signal, how))
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        proc.stderr.close()
    _until(lambda: not any(outer.iterdir()), f"{outer} still holds {sorted(p.name for p in outer.iterdir())}")


def _shell_blocks(text: str) -> list[str]:
    """The lines of every ```sh block (commands to run, not output)."""
    lines, inside = [], False
    for line in text.splitlines():
        if line.startswith("```"):
            inside = line.strip() in ("```sh", "```bash", "```console")
            continue
        if inside:
            lines.append(line.strip())
    return lines


def test_readme_never_logs_in_or_exports_pulumi_settings():
    """`pulumi login` would change a Pulumi Cloud user's global login, an exported passphrase or
    PULUMI_SKIP_CONFIRMATIONS every later command of the shell; the README's and docs' commands
    leave backends and passphrases to scripts/engine/bin/pulumi."""
    for doc in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        commands = _shell_blocks(doc.read_text())
        assert not [c for c in commands if "pulumi login" in c], doc
        assert not [c for c in commands if c.removeprefix("$ ").startswith("export PULUMI_")], doc
