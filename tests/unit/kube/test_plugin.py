"""Exec credential plugins (modelplane.kube.plugin): bounded in time and output, in their own
process group (killed whole), named by command only, their token checked before it is used."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest

from modelplane.kube import ConfigError, load_kubeconfig
from modelplane.observe.read import NotRead, read_clusters

from .kubeconfigs import SECRET, document, plugin, write

CREDENTIAL = "import json; print(json.dumps({'kind': 'ExecCredential', 'status': {'token': %r}}))"


def test_an_exec_plugin_gives_the_token(tmp_path: Path) -> None:
    path = write(tmp_path / "k", document(user=plugin("-c", CREDENTIAL % SECRET)))
    assert load_kubeconfig(path).token == SECRET


def test_19_1_an_exec_plugin_token_with_a_newline_is_never_printed(tmp_path: Path) -> None:
    path = write(tmp_path / "k", document(user=plugin("-c", CREDENTIAL % (SECRET + "\n"))))
    found = read_clusters({"c": path}, timeout=5)["c"]
    assert isinstance(found, NotRead)
    assert "printed a status.token that is not one line" in found.reason and SECRET not in found.reason


def test_19_2_exec_plugin_arguments_are_never_printed_on_timeout(tmp_path: Path) -> None:
    path = write(tmp_path / "k", document(user=plugin("-c", "import time; time.sleep(30)",
                                                      f"--client-secret={SECRET}")))
    start = time.monotonic()
    with pytest.raises(ConfigError) as err:
        load_kubeconfig(path, timeout=1.0)
    assert time.monotonic() - start < 4
    message = str(err.value)
    assert f"the credential plugin {Path(sys.executable).name} did not finish" in message
    assert SECRET not in message and "client-secret" not in message and "time.sleep" not in message


def test_19_2_plugin_output_and_stderr_are_never_printed(tmp_path: Path) -> None:
    script = f"import sys; print('{SECRET}'); print('{SECRET}', file=sys.stderr); sys.exit(3)"
    with pytest.raises(ConfigError) as err:
        load_kubeconfig(write(tmp_path / "k", document(user=plugin("-c", script))))
    assert "exited 3" in str(err.value) and SECRET not in str(err.value)


def test_19_5_a_plugin_flooding_stdout_is_stopped(tmp_path: Path) -> None:
    flood = "import sys\nwhile True: sys.stdout.write('x' * 65536)"
    start = time.monotonic()
    path = write(tmp_path / "k", document(user=plugin("-c", flood)))
    with pytest.raises(ConfigError, match=r"printed more than 1048576 bytes; it was stopped"):
        load_kubeconfig(path, timeout=10)
    assert time.monotonic() - start < 5
    found = read_clusters({"c": path}, timeout=5)["c"]           # a client-side failure, not an outage
    assert isinstance(found, NotRead) and "printed more than" in found.reason


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@pytest.mark.parametrize("plugin_exits", [False, True])
def test_19_6_plugin_children_die_with_its_process_group(tmp_path: Path, plugin_exits: bool) -> None:
    """A plugin that starts a child (which keeps stdout open) and times out, or exits while the
    child lingers: the whole group is killed, nothing is orphaned."""
    pids = tmp_path / "child.pid"
    script = (f"import subprocess, sys, time\n"
              f"child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
              f"open({str(pids)!r}, 'w').write(str(child.pid))\n"
              + ("sys.exit(0)\n" if plugin_exits else "time.sleep(60)\n"))
    with pytest.raises(ConfigError):
        load_kubeconfig(write(tmp_path / "k", document(user=plugin("-c", script))), timeout=2)
    child = int(pids.read_text())
    deadline = time.monotonic() + 5
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child), f"the plugin's child {child} outlived it"


def test_the_plugin_is_told_it_cannot_prompt(tmp_path: Path) -> None:
    script = ("import json, os, sys; info = json.loads(os.environ['KUBERNETES_EXEC_INFO']); "
              "assert sys.stdin.read() == ''; "
              "print(json.dumps({'status': {'token': 'interactive-' + str(info['spec']['interactive'])}}))")
    assert load_kubeconfig(write(tmp_path / "k", document(user=plugin("-c", script)))).token == "interactive-False"


def test_json_of_the_wrong_shape_is_no_credential(tmp_path: Path) -> None:
    for output in ("[1]", json.dumps({"status": {"token": 5}}), "[" * 100_000):
        script = f"import sys; sys.stdout.write({output!r})"
        with pytest.raises(ConfigError, match="printed no ExecCredential status.token"):
            load_kubeconfig(write(tmp_path / "k", document(user=plugin("-c", script))))
