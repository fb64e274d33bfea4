"""The Pulumi CLI rules scripts/engine/bin/pulumi relies on, against the real CLI (issue 32, item 3)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path


def _pulumi(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["pulumi", *args, "--non-interactive"], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=120)


def test_pulumi_backend_url_and_passphrase_file_replace_the_login_and_the_passphrase(engine_env, tmp_path):
    """pulumi/pulumi#5789 (the PR that added it): "The PULUMI_BACKEND_URL env var allows specifying
    the backend to use instead of deferring to the project or the ~/.pulumi/credentials.json file
    ... without a dependence on this piece of global filesystem state"; pulumi.com docs, "Pulumi CLI
    environment variables": PULUMI_CONFIG_PASSPHRASE_FILE is the alternative to
    PULUMI_CONFIG_PASSPHRASE. So the wrapper's defaults reach a stack without `pulumi login`, and
    leave PULUMI_HOME's credentials (a user's login) as they were: none written."""
    home, state, project = tmp_path / "home", tmp_path / "state", tmp_path / "project"
    for d in (home, state, project):
        d.mkdir()
    (project / "Pulumi.yaml").write_text("name: contract\nruntime: yaml\n")
    passphrase = tmp_path / "passphrase"
    passphrase.write_text("a-passphrase-of-this-test\n")
    env = {k: v for k, v in {**os.environ, **engine_env}.items() if k != "PULUMI_CONFIG_PASSPHRASE"}
    env.update({"PULUMI_HOME": str(home), "PULUMI_BACKEND_URL": f"file://{state}",
                "PULUMI_CONFIG_PASSPHRASE_FILE": str(passphrase)})
    init = _pulumi(env, project, "stack", "init", "dev", "--secrets-provider", "passphrase")
    assert init.returncode == 0, init.stderr
    secret = _pulumi(env, project, "config", "set", "--secret", "token", "not-a-real-token", "--stack", "dev")
    assert secret.returncode == 0, secret.stderr
    assert "not-a-real-token" not in (project / "Pulumi.dev.yaml").read_text()     # encrypted with the file's
    shown = _pulumi(env, project, "config", "get", "token", "--stack", "dev")
    assert shown.stdout.strip() == "not-a-real-token", shown.stderr
    assert any((state / ".pulumi").rglob("dev.json*")), "the stack lives in the PULUMI_BACKEND_URL state"
    assert not (home / "credentials.json").exists(), "no login was written"
    wrong = {**env, "PULUMI_CONFIG_PASSPHRASE_FILE": str(tmp_path / "missing")}
    assert _pulumi(wrong, project, "config", "get", "token", "--stack", "dev").returncode != 0
