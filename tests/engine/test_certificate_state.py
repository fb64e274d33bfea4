"""The hop CA and certificates through the real Pulumi engine: every private key is in the
state only encrypted (`pulumi stack export` shows ciphertext, never a PEM key), the public
certificates are readable, and a second `up` changes nothing (made once, not per run)."""
import os
import shutil
import subprocess
from pathlib import Path

from tests.engine.conftest import REPO

PROGRAM = REPO / "tests" / "engine" / "certificate_program"


def test_private_keys_are_encrypted_in_the_state_and_certificates_are_made_once(engine_env, tmp_path):
    from pulumi import automation as auto

    from automation.processes import TrackedPulumiCommand

    work = tmp_path / "program"
    shutil.copytree(PROGRAM, work)
    (work / "Pulumi.yaml").write_text(
        "name: certificate-state\nruntime:\n  name: python\n  options:\n"
        f"    toolchain: pip\n    virtualenv: {REPO / '.venv'}\n")
    state, home = tmp_path / "state", tmp_path / "home"
    state.mkdir()
    home.mkdir()
    env = {**engine_env, "PULUMI_BACKEND_URL": f"file://{state}", "PULUMI_HOME": str(home),
           "PULUMI_CONFIG_PASSPHRASE": "modelplane-engine-tests", "PYTHONPATH": str(REPO)}
    bin_dir = shutil.which("pulumi", path=env["PATH"])
    assert bin_dir, "pulumi not on the engine PATH"
    command = TrackedPulumiCommand(root=str(Path(bin_dir).resolve().parent.parent))
    opts = auto.LocalWorkspaceOptions(work_dir=str(work), pulumi_home=str(home), env_vars=env,
                                      secrets_provider="passphrase", pulumi_command=command)
    stack = auto.create_stack("certs", work_dir=str(work), opts=opts)
    # the language host built here reads the config as an object: give it one
    stack.set_config("certificate-state:purpose", auto.ConfigValue("the hop certificates' state"))
    try:
        first = stack.up(color="never")
        assert first.summary.result == "succeeded", first.stdout
        assert "BEGIN CERTIFICATE" in first.outputs["caCert"].value
        assert first.outputs["serverKey"].secret
        # `pulumi stack export` as a person runs it (the Automation API's adds --show-secrets)
        proc = subprocess.run(["pulumi", "stack", "export", "--stack", "certs"], cwd=work, env={**os.environ, **env},
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        text = proc.stdout
        assert "ciphertext" in text
        assert "PRIVATE KEY" not in text, "a private key is in plain text in the state"
        assert "BEGIN CERTIFICATE" in text    # public certificates stay readable
        again = stack.up(color="never")
        assert again.summary.resource_changes == {"same": 4}, again.summary.resource_changes
    finally:
        stack.destroy(color="never")
        stack.workspace.remove_stack("certs")
