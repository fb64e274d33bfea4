"""The sim's state directory read back (sim/state.py, sim/fleet.py): `sim down` removes only a
directory its marker proves is the sim's, never through a symlink, signals only a process
whose start time and command line match the record, and a sim.json of any other shape is an
error, never a traceback."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from sim import SimError, SimFleet
from sim.process import start_time
from sim.state import MARKER, STATE_FILE
from tests.unit.observe.test_hardening import run


def state_dir(tmp_path: Path, state: Any, *, marker: bool = True) -> Path:
    d = tmp_path / "state"
    d.mkdir()
    (d / STATE_FILE).write_text(state if isinstance(state, str) else json.dumps(state))
    if marker:
        (d / MARKER).write_text("state directory of `python -m modelplane sim`\n")
    return d


def record(pid: int, argv0: str, start: str | None = None) -> dict[str, Any]:
    return {"clusters": {"a": {"kubeconfig": "/k", "server": "https://127.0.0.1:1", "ports": {"apiserver": 1},
                               "processes": [{"name": "kube-apiserver", "pid": pid, "start": start or
                                              str(start_time(pid)), "log": "/l", "argv0": argv0}]}}}


def test_19_8_sim_down_keeps_a_directory_without_the_marker(tmp_path: Path) -> None:
    d = state_dir(tmp_path, {}, marker=False)
    (d / "precious").write_text("x")
    with pytest.raises(SimError, match="nothing was stopped or removed"):
        SimFleet(d).down()
    assert (d / "precious").exists()


def test_19_8_sim_down_never_follows_a_symlinked_state_dir(tmp_path: Path) -> None:
    target = state_dir(tmp_path, {})
    (target / "precious").write_text("x")
    link = tmp_path / "link"
    link.symlink_to(target)
    for action in (SimFleet(link).down, SimFleet(link).status):
        with pytest.raises(SimError, match="is a symlink; the sim does not follow it"):
            action()
    assert (target / "precious").exists()


def test_19_8_a_recorded_pid_is_signalled_only_when_its_command_line_matches(tmp_path: Path) -> None:
    """A sim.json naming a live process of another program (right pid and start time, another
    command): `down` must not signal it."""
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        time.sleep(0.2)
        d = state_dir(tmp_path, record(other.pid, "/usr/local/bin/kube-apiserver"))
        SimFleet(d).down()
        assert other.poll() is None, "down signalled a process that is not the sim's"
        assert not d.exists()                           # the marker proves the directory is the sim's
    finally:
        other.kill()
        other.wait()


@pytest.mark.parametrize(("state", "problem"), [
    ("[1, 2]", "expected an object, found list"),
    ('"text"', "expected an object, found str"),
    ({"clusters": {"a": {"server": "s", "processes": []}}}, "clusters.a.kubeconfig is missing"),
    ({"clusters": {"a": {"kubeconfig": "k", "server": "s", "processes": [{"name": "etcd"}]}}},
     "clusters.a.processes[0].pid is missing or not int"),
    ({"clusters": {"a": {"kubeconfig": "k", "server": "s", "processes": [
        {"name": "etcd", "pid": "abc", "start": "1", "log": "l", "argv0": "e"}]}}}, "pid is missing or not int"),
    ({"clusters": {"a": {"kubeconfig": "k", "server": "s", "ports": {"etcd": "x"}}}}, "ports must map roles"),
    ({"clusters": {"a": {"kubeconfig": "k", "server": "s", "ports": {"etcd": 1.5}}}}, "ports must map roles"),
    ("{", "JSONDecodeError"),
])
def test_19_17_malformed_sim_json_is_an_error_not_a_traceback(tmp_path: Path, state: Any, problem: str) -> None:
    d = state_dir(tmp_path, state)
    for action in ("status", "down"):
        code, out, err = run("sim", action, "--state-dir", str(d))
        assert code == 1, (out, err)
        assert problem in err and "Traceback" not in err, err
    assert (d / STATE_FILE).exists()


def test_19_low_sim_status_of_a_file_never_advises_removing_it(tmp_path: Path) -> None:
    afile = tmp_path / "passwd"
    afile.write_text("root:x:0:0::/root:/bin/bash\n")
    for action in ("status", "down"):
        code, out, err = run("sim", action, "--state-dir", str(afile))
        assert code == 1
        assert "is not a directory, so it is not a sim state directory" in err
        assert "remove" not in err.lower()
    assert afile.exists()
