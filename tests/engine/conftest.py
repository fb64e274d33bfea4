"""Fixtures for the real-engine tests: the Pulumi CLI, language host and Kubernetes provider
built by scripts/bootstrap-tools, driven through the Automation API.

Every test here needs those tools. When they are not built, the session fixture skips the
tests with a loud reason (also repeated in the terminal summary); set
MODELPLANE_REQUIRE_ENGINE=1 to turn that skip into a failure (CI on a machine that has run
scripts/bootstrap-tools).

Stacks: each test gets its own stack, named `enginetest-<hex>`, whose config is
stacks/Pulumi.render.yaml with `manifests` and `renderDir` pointed at temp dirs. The
program runs from the repository (work_dir = repo root); the state lives in a `file://`
backend in a temp dir, secrets use a passphrase, PULUMI_HOME is a temp dir. The stack's
config file is removed again at teardown, so the repository is left as it was.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import subprocess
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.loud_skip import LoudSkips
from tests.throwaway_stack import create_throwaway_stack

REPO = Path(__file__).resolve().parents[2]
ENGINE_ENV = REPO / "scripts" / "engine-env"
RENDER_STACK_FILE = REPO / "stacks" / "Pulumi.render.yaml"
PROGRAM_FILES = ["Pulumi.yaml", "__main__.py", "components", "providers", "stacks/Pulumi.render.yaml"]


def _engine_environment() -> tuple[dict[str, str] | None, str]:
    """Run scripts/engine-env and return the environment it sets up, or the reason it refused."""
    script = f'set -e; out="$({shlex.quote(str(ENGINE_ENV))})"; eval "$out"; env -0'
    proc = subprocess.run(["bash", "-c", script], capture_output=True, text=True, cwd=REPO)
    if proc.returncode != 0:
        return None, proc.stderr.strip() or f"scripts/engine-env exited {proc.returncode}"
    env = dict(kv.split("=", 1) for kv in proc.stdout.split("\0") if "=" in kv)
    return env, ""


SKIPS = LoudSkips("REAL PULUMI ENGINE NOT AVAILABLE, engine test NOT RUN",
                  "tests/engine SKIPPED: the real Pulumi engine was not exercised",
                  "Build the tools with scripts/bootstrap-tools (docs/engine-tools.md).")
_skip_loudly = SKIPS.skip


def pytest_terminal_summary(terminalreporter: Any) -> None:
    SKIPS.summary(terminalreporter)


@pytest.fixture(scope="session")
def engine_env() -> dict[str, str]:
    """The environment from scripts/engine-env (PATH with the tools first, PULUMI_* settings)."""
    missing = [p for p in PROGRAM_FILES if not (REPO / p).exists()]
    if missing:
        _skip_loudly(f"the Pulumi program is incomplete, missing: {', '.join(missing)}")
    env, why = _engine_environment()
    if env is None:
        _skip_loudly(why)
    assert env is not None
    if not shutil.which("pulumi", path=env.get("PATH")):
        _skip_loudly("scripts/engine-env succeeded but no `pulumi` is on its PATH")
    return env


class EngineStack:
    """One throwaway stack of the repository's program, with its own manifests and render dir."""

    def __init__(self, stack: Any, name: str, render_dir: Path, config_file: Path, env: dict[str, str]):
        self.stack = stack
        self.name = name
        self.render_dir = render_dir
        self.config_file = config_file
        self.env = env

    def export_text(self) -> str:
        """`pulumi stack export` exactly as a person runs it (the Automation API's
        export_stack adds --show-secrets, which decrypts every secret)."""
        proc = subprocess.run(["pulumi", "stack", "export", "--stack", self.name], cwd=REPO,
                              env={**os.environ, **self.env}, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    def modelplane(self, *args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
        """`python -m modelplane ARGS` (the split driver) against this stack's backend."""
        return subprocess.run([str(REPO / ".venv" / "bin" / "python"), "-m", "modelplane", *args, "--stack", self.name],
                              cwd=REPO, env={**os.environ, **self.env}, capture_output=True, text=True,
                              timeout=timeout)

    def set_manifests(self, path: Path) -> None:
        from pulumi import automation as auto

        self.stack.set_config("modelplane:manifests", auto.ConfigValue(str(path)))


@pytest.fixture
def make_stack(engine_env: dict[str, str], tmp_path: Path) -> Callable[..., EngineStack]:
    from automation.processes import TrackedPulumiCommand

    # Stack files of runs that were killed before their teardown (older than two hours, so a
    # concurrent run's files are left alone).
    for stale in (REPO / "stacks").glob("Pulumi.enginetest-*.yaml"):
        try:
            if time.time() - stale.stat().st_mtime > 7200:
                stale.unlink()
        except OSError:
            pass
    made: list[EngineStack] = []
    state = tmp_path / "state"
    home = tmp_path / "pulumi-home"
    state.mkdir()
    home.mkdir()
    env = dict(engine_env)
    env.update({
        "PULUMI_BACKEND_URL": f"file://{state}",
        "PULUMI_HOME": str(home),
        "PULUMI_CONFIG_PASSPHRASE": env.get("PULUMI_CONFIG_PASSPHRASE") or "modelplane-engine-tests",
    })
    bin_dir = Path(shutil.which("pulumi", path=env["PATH"])).resolve().parent  # type: ignore[arg-type]
    command = TrackedPulumiCommand(root=str(bin_dir.parent))

    def make(manifests: Path, extra_config: dict[str, Any] | None = None) -> EngineStack:
        name = f"enginetest-{uuid.uuid4().hex[:10]}"
        render_dir = tmp_path / f"render-{name}"
        config = dict((yaml.safe_load(RENDER_STACK_FILE.read_text()) or {}).get("config") or {})
        config["modelplane:manifests"] = str(manifests)
        config["modelplane:renderDir"] = str(render_dir)
        config.update(extra_config or {})
        stack, config_file = create_throwaway_stack(name, config, env, str(home), command,
                                                    "tests/engine/conftest.py")
        es = EngineStack(stack, name, render_dir, config_file, env)
        made.append(es)
        return es

    yield make

    for es in made:
        with contextlib.suppress(Exception):  # teardown must still remove the config file
            es.stack.workspace.remove_stack(es.name, force=True)
        es.config_file.unlink(missing_ok=True)
        # shard stacks a split fleet's driver made (`<name>.<shard>`); their state is in tmp_path
        for shard_file in (REPO / "stacks").glob(f"Pulumi.{es.name}.*.yaml"):
            shard_file.unlink(missing_ok=True)
