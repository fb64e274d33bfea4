"""Bad input and faults of `sim up`: each a clear error saying what to do, and nothing left running."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from modelplane.api import load_manifests
from sim import SimError, SimFleet, SimTools
from sim.fleet import port_free
from sim.tools import REQUIRED
from tests.sim.stack import wait_for

from .conftest import REPO, processes_mentioning

pytestmark = pytest.mark.sim

ONE_CLUSTER = """\
apiVersion: modelplane.ai/v1alpha1
kind: InferenceClass
metadata: {name: fake-gpu}
spec:
  devices:
  - {name: gpu, driver: gpu.example.com, deviceClassName: gpu.example.com, capacity: {memory: {value: 80Gi}}}
---
apiVersion: modelplane.ai/v1alpha1
kind: InferenceCluster
metadata: {name: solo}
spec:
  cluster: {source: Kind}
  nodePools: [{name: gpu, className: fake-gpu, nodeCount: 1}]
---
# The control-plane gateway on solo, so `up` starts no control cluster besides it.
apiVersion: modelplane.ai/v1alpha1
kind: InferenceGateway
metadata: {name: default}
spec: {backend: Traefik, traefik: {version: 41.3.0}, clusterName: solo}
"""


@pytest.fixture
def manifests(tmp_path: Path) -> Path:
    path = tmp_path / "fleet.yaml"
    path.write_text(ONE_CLUSTER)
    return path


def fake_tools(real: SimTools, root: Path, replace: dict[str, str | None]) -> SimTools:
    """A tools dir linking to the real one, with some binaries replaced by scripts or left out."""
    (root / "bin").mkdir(parents=True)
    for entry in (real.root / "bin").iterdir():
        if entry.name not in replace:
            (root / "bin" / entry.name).symlink_to(entry)
    for name, script in replace.items():
        if script is not None:
            (root / "bin" / name).write_text(script)
            (root / "bin" / name).chmod(0o755)
    for sub in ("stages", "crds"):
        (root / sub).symlink_to(real.root / sub)
    return SimTools(root)


def assert_nothing_left(state: Path) -> None:
    assert not processes_mentioning(str(state)), f"processes of {state} are still running"
    assert not (state / "sim.json").exists()


def test_missing_binary_names_it_and_how_to_build(sim_tools: SimTools, manifests: Path, tmp_path: Path) -> None:
    tools = fake_tools(sim_tools, tmp_path / "tools", {"kube-scheduler": None})
    state = tmp_path / "state"
    with pytest.raises(SimError) as err:
        SimFleet(state, tools=tools).up(load_manifests(manifests))
    assert "kube-scheduler" in str(err.value)
    assert "scripts/bootstrap-tools --only sim" in str(err.value)
    assert_nothing_left(state)


def test_missing_binary_through_the_cli(tmp_path: Path, manifests: Path) -> None:
    (tmp_path / "empty-tools" / "bin").mkdir(parents=True)
    proc = subprocess.run([sys.executable, "-m", "modelplane", "sim", "up", str(manifests),
                           "--state-dir", str(tmp_path / "state")], cwd=REPO, capture_output=True, text=True,
                          env={**os.environ, "MODELPLANE_SIM_TOOLS": str(tmp_path / "empty-tools")}, timeout=120)
    assert proc.returncode == 1
    assert proc.stderr.startswith("error: the simulated clusters need tools that are not built")
    assert all(name in proc.stderr for name in REQUIRED)
    assert "Traceback" not in proc.stderr


def test_a_component_that_dies_is_reported_and_everything_started_is_stopped(
        sim_tools: SimTools, manifests: Path, tmp_path: Path) -> None:
    """kwok exits at start: the error names it with its log, after etcd, the API server, the
    controller-manager and the scheduler were started; all of them are stopped."""
    tools = fake_tools(sim_tools, tmp_path / "tools", {"kwok": "#!/bin/sh\necho 'kwok: cannot start' >&2\nexit 3\n"})
    state = tmp_path / "state"
    with pytest.raises(SimError) as err:
        SimFleet(state, tools=tools, timeout=60).up(load_manifests(manifests))
    message = str(err.value)
    assert "cluster solo: kwok exited (code 3)" in message
    assert "kwok: cannot start" in message
    assert "Every process the sim had started was stopped." in message
    assert_nothing_left(state)
    assert (state / "solo" / "logs" / "kube-apiserver.log").exists()  # logs are kept for reading


def listening_amid_free_ports() -> socket.socket:
    """A listening socket on a port P whose neighbours P-2 .. P+4 (the rest of one cluster's seven
    ports when P is its API server port) are free, so only P can be reported in use."""
    for _ in range(50):
        busy = socket.socket()
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        if all(port_free(p) for p in range(port - 2, port + 5) if p != port):
            return busy
        busy.close()
    pytest.fail("found no port with 6 free neighbours on 127.0.0.1 in 50 tries")


def test_port_in_use(sim_tools: SimTools, manifests: Path, tmp_path: Path) -> None:
    with listening_amid_free_ports() as busy:
        port = busy.getsockname()[1]
        state = tmp_path / "state"
        with pytest.raises(SimError) as err:
            # the API server is the third port of a cluster
            SimFleet(state, tools=sim_tools, first_port=port - 2).up(load_manifests(manifests))
    assert f"port 127.0.0.1:{port} (apiserver of cluster solo) is in use by another process" in str(err.value)
    assert "omit --first-port" in str(err.value)
    assert_nothing_left(state)


def test_not_ready_in_time(sim_tools: SimTools, manifests: Path, tmp_path: Path) -> None:
    state = tmp_path / "state"
    with pytest.raises(SimError) as err:
        SimFleet(state, tools=sim_tools, timeout=0.2).up(load_manifests(manifests))
    assert "did not become ready within 0.2s" in str(err.value)
    assert "retry with a larger --timeout" in str(err.value)
    assert_nothing_left(state)


def test_running_and_stale_state_dirs(sim_tools: SimTools, manifests: Path, tmp_path: Path) -> None:
    """A second `up` on a running state dir is refused; after the processes are killed (as by a
    reboot) the dir is stale, `up` says to run `sim down`, and `down` clears it."""
    state = tmp_path / "state"
    fleet = load_manifests(manifests)
    sim = SimFleet(state, tools=sim_tools)
    sim.up(fleet)
    try:
        with pytest.raises(SimError, match="already run from"):
            SimFleet(state, tools=sim_tools).up(fleet)
        record = json.loads((state / "sim.json").read_text())
        for proc in record["clusters"]["solo"]["processes"]:
            os.kill(proc["pid"], signal.SIGKILL)
        # wait until the kernel has finished them (zombies count as gone): status reads the same
        # pid + start-time records that `up` checks
        wait_for("the SIGKILLed processes finished", lambda: not [
            (row.name, name) for row in SimFleet(state).status() for name, up in row.processes.items() if up],
            timeout=60, interval=0.1,
            explain=lambda: f"still running: {[(r.name, r.processes) for r in SimFleet(state).status()]}")
        with pytest.raises(SimError) as err:
            SimFleet(state, tools=sim_tools).up(fleet)
        assert "stale sim state" in str(err.value) and "sim down --state-dir" in str(err.value)
        assert [row.running for row in SimFleet(state).status()] == [False]
    finally:
        SimFleet(state).down()
    assert not state.exists()
    assert not processes_mentioning(str(state))


def test_not_a_sim_state_dir(sim_tools: SimTools, manifests: Path, tmp_path: Path) -> None:
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    with pytest.raises(SimError, match="is not empty and is not a sim state directory"):
        SimFleet(tmp_path / "mine", tools=sim_tools).up(load_manifests(manifests))
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep me"
    with pytest.raises(SimError, match="no simulated clusters are recorded"):
        SimFleet(tmp_path / "mine").down()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP], ids=lambda s: s.name)
def test_a_signal_while_starting_stops_everything(sig: signal.Signals, sim_tools: SimTools, manifests: Path,
                                                  tmp_path: Path) -> None:
    """`sim up` gets a signal once its first processes run: it stops them and exits 1 saying so."""
    state = tmp_path / "state"
    proc = subprocess.Popen([sys.executable, "-m", "modelplane", "sim", "up", str(manifests),
                             "--state-dir", str(state)], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                record = json.loads((state / "sim.json").read_text())
                if len(record["clusters"]["solo"]["processes"]) >= 2:  # etcd and the API server
                    break
            except (OSError, ValueError, KeyError):
                pass
            time.sleep(0.05)
        else:
            pytest.fail("sim up did not start its processes within 60s")
        proc.send_signal(sig)
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, stderr
    assert f"interrupted by {sig.name}; every process the sim had started was stopped" in stderr
    assert "Traceback" not in stderr
    assert_nothing_left(state)
