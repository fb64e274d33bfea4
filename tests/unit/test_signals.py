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


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_a_stopping_signal_tears_the_fixtures_down(tmp_path: Path, sig: signal.Signals) -> None:
    (tmp_path / "test_waits.py").write_text(SUITE)
    run = subprocess.Popen([sys.executable, "-m", "pytest", "-q", "-p", "tests.signals", "-p", "no:cacheprovider",
                            "--rootdir", str(tmp_path), str(tmp_path / "test_waits.py")],
                           cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO)},
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 60
    while not (tmp_path / "STARTED").exists():
        assert run.poll() is None and time.monotonic() < deadline, run.communicate()[0]
        time.sleep(0.05)
    child = int((tmp_path / "CHILD").read_text())
    run.send_signal(sig)
    out, _ = run.communicate(timeout=60)
    assert (tmp_path / "TORN_DOWN").exists(), out
    assert not _alive(child)
    assert run.returncode == pytest.ExitCode.INTERRUPTED, out
