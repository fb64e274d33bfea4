"""Messages a newcomer reads (issue 32, item 8), through the installed console script: a closed port
said as such, a fleet that places nothing fails the demo, counted nouns, no doubled prefixes, a
missing directory, a broken YAML's line in its file."""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CLI = REPO / ".venv" / "bin" / "modelplane"
KIND = REPO / "examples" / "kind"


def cli(*argv: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(CLI), *argv], cwd=REPO, capture_output=True, text=True, timeout=timeout)


def test_split_against_a_closed_port_says_nothing_listens_there():
    with socket.socket() as held:              # bound, never listening: connections are refused
        held.bind(("127.0.0.1", 0))
        port = held.getsockname()[1]
        proc = cli("split", f"http://127.0.0.1:{port}/ml-team/chat", "-n", "1", "--timeout", "5")
    assert proc.returncode == 1
    assert f"failed: 1 (nothing listening at 127.0.0.1:{port} x1)" in proc.stdout
    assert f"http://127.0.0.1:{port}/ml-team/chat: 1 request in " in proc.stdout      # not "1 requests"


def test_demo_of_a_fleet_that_places_nothing_fails(tmp_path):
    (tmp_path / "platform.yaml").write_text((KIND / "platform.yaml").read_text())
    models = (KIND / "models.yaml").read_text().replace('quantity("20Gi")', 'quantity("200Gi")')
    (tmp_path / "models.yaml").write_text(models)
    proc = cli("demo", str(tmp_path), "-n", "1")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "ml-team/chat: 0/1 replicas: nothing placed" in proc.stdout
    assert "demo: nothing placed, so no service has anything to route to" in proc.stderr
    assert f"modelplane explain {tmp_path} DEPLOYMENT" in proc.stderr


@pytest.mark.parametrize("command", [["plan"], ["lint"], ["render", "-"], ["demo"], ["explain", "-", "chat"]])
def test_a_missing_directory_is_said_as_such(command, tmp_path):
    missing = tmp_path / "no-such-fleet"
    argv = [command[0], str(missing), *command[1:]] if command[0] != "explain" else ["explain", str(missing), "chat"]
    proc = cli(*argv)
    assert proc.returncode == 2
    assert f"{missing}: no such file or directory" in proc.stderr
    assert "document 0" not in proc.stderr and "(document)" not in proc.stderr


def test_a_broken_yaml_names_its_line_in_the_file_and_where_it_began(tmp_path):
    text = (KIND / "platform.yaml").read_text() + '---\napiVersion: modelplane.ai/v1alpha1\nkind: X\nmetadata:\n' \
        '  name: "unclosed\n'
    (tmp_path / "fleet.yaml").write_text(text)
    start = text.splitlines().index('  name: "unclosed') + 1
    proc = cli("plan", str(tmp_path))
    assert proc.returncode == 2
    assert f"fleet.yaml, document 4, line {start + 1}: not valid YAML: found unexpected end of stream" in proc.stderr
    assert f"while scanning a quoted scalar that starts at line {start}" in proc.stderr


def test_an_invalid_selector_is_said_once(tmp_path):
    (tmp_path / "platform.yaml").write_text((KIND / "platform.yaml").read_text())
    (tmp_path / "models.yaml").write_text((KIND / "models.yaml").read_text().replace(">= 0\n", ">=\n", 1))
    proc = cli("plan", str(tmp_path))
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: 1 problem in the manifests; nothing was applied:\n")
    assert proc.stderr.count("invalid CEL selector") == 1


def test_counted_nouns():
    from modelplane.words import counted

    assert [counted(n, "cluster") for n in (0, 1, 2)] == ["0 clusters", "1 cluster", "2 clusters"]
    assert counted(1, "advisory finding") == "1 advisory finding"
    assert counted(3, "replica", "replicas") == "3 replicas"
