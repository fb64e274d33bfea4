"""A test run stopped by SIGTERM or SIGHUP tears its fixtures down (tests/signals.py), so a
fixture's child process (a sim control plane in tests/sim) does not outlive it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SUITE = '''
import subprocess, sys, time
import pytest

@pytest.fixture
def child():
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
    open("CHILD", "w").write(str(proc.pid))
    yield proc
    proc.terminate()
    proc.wait()
    open("TORN_DOWN", "w").write("yes")

def test_waits(child):
    open("STARTED", "w").write("yes")
    time.sleep(600)
'''


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _stop(run: subprocess.Popen[str], child: int | None) -> None:
    """Whatever happened, neither the inner run nor its fixture's child outlives the test."""
    if run.poll() is None:
        os.killpg(run.pid, signal.SIGKILL)
        run.wait()
    if child is not None and _alive(child):
        os.kill(child, signal.SIGKILL)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_a_stopping_signal_tears_the_fixtures_down(tmp_path: Path, sig: signal.Signals) -> None:
    """The inner run gets its own session, so the cleanup can stop it whole. The wait for it
    to start is a liveness bound, not a timing assertion: a loaded machine takes a while to
    start pytest, and the failure message must never wait for a run that sleeps 600 s (it
    once did, past the suite's timeout, leaving the inner run and its child behind)."""
    (tmp_path / "test_waits.py").write_text(SUITE)
    run = subprocess.Popen([sys.executable, "-m", "pytest", "-q", "-p", "tests.signals", "-p", "no:cacheprovider",
                            "--rootdir", str(tmp_path), str(tmp_path / "test_waits.py")],
                           cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO)}, start_new_session=True,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    child: int | None = None
    try:
        deadline = time.monotonic() + 150
        while not (tmp_path / "STARTED").exists():
            if run.poll() is not None:
                pytest.fail(f"the inner run ended before its test started: {run.communicate()[0]}")
            if time.monotonic() > deadline:
                pytest.fail("the inner run's test did not start within 150 s")
            time.sleep(0.05)
        child = int((tmp_path / "CHILD").read_text())
        run.send_signal(sig)
        out, _ = run.communicate(timeout=100)
        assert (tmp_path / "TORN_DOWN").exists(), out
        assert not _alive(child)
        assert run.returncode == pytest.ExitCode.INTERRUPTED, out
    finally:
        if child is None and (tmp_path / "CHILD").exists():
            child = int((tmp_path / "CHILD").read_text())
        _stop(run, child)


XDIST_SUITE = '''
import os, subprocess, sys, time
import pytest

@pytest.fixture
def child(tmp_path_factory):
    # Like a sim control plane: its own session, so only the worker's teardown can stop it.
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
    name = os.environ["PYTEST_XDIST_WORKER"]
    open(f"CHILD-{name}", "w").write(str(proc.pid))
    yield proc
    time.sleep(12)  # longer than xdist gives a worker to exit (10 s): `sim down` of a fleet can take that
    proc.terminate()
    proc.wait()
    open(f"TORN_DOWN-{name}", "w").write("yes")

@pytest.mark.parametrize("n", [0, 1])
def test_waits(child, n):
    time.sleep(600)
'''


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_a_stopping_signal_to_the_xdist_controller_tears_every_workers_fixtures_down(
        tmp_path: Path, sig: signal.Signals) -> None:
    """`make test` runs `pytest -n N`: the signal reaches the controller, the fixtures (and the
    processes they started) live in the workers. Each worker's fixture starts a child in its own
    session; after the signal every worker's teardown has run and no child, no worker survives."""
    (tmp_path / "test_waits.py").write_text(XDIST_SUITE)
    run = subprocess.Popen([sys.executable, "-m", "pytest", "-q", "-n", "2", "-p", "tests.signals",
                            "-p", "no:cacheprovider", "--rootdir", str(tmp_path), str(tmp_path / "test_waits.py")],
                           cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO)}, start_new_session=True,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    children: list[int] = []
    try:
        deadline = time.monotonic() + 200
        while len(list(tmp_path.glob("CHILD-*"))) < 2:
            if run.poll() is not None:
                pytest.fail(f"the inner run ended before both tests started: {run.communicate()[0]}")
            if time.monotonic() > deadline:
                pytest.fail("the inner run's two workers did not start their tests within 200 s")
            time.sleep(0.05)
        time.sleep(0.2)  # both pid files are complete (written in one call each)
        children = [int(f.read_text()) for f in tmp_path.glob("CHILD-*")]
        workers = _descendants(run.pid)
        run.send_signal(sig)
        out, _ = run.communicate(timeout=150)
        assert sorted(f.name for f in tmp_path.glob("TORN_DOWN-*")) == ["TORN_DOWN-gw0", "TORN_DOWN-gw1"], out
        assert [pid for pid in children + workers if _alive(pid)] == [], out
        assert run.returncode == pytest.ExitCode.INTERRUPTED, out
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
            run.wait()
        for pid in children:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


def _descendants(pid: int) -> list[int]:
    found: list[int] = []
    todo = [pid]
    while todo:
        parent = todo.pop()
        for task in Path(f"/proc/{parent}/task").glob("*"):
            try:
                kids = [int(k) for k in (task / "children").read_text().split()]
            except OSError:
                continue
            found += kids
            todo += kids
    return found
