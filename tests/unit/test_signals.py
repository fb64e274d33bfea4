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
