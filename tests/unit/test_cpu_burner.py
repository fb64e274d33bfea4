"""benchmarks/cpu_burner.py, hostile: whatever stops the wrapper (SIGTERM, SIGHUP, SIGINT, even
SIGKILL), no burner and no command outlives it; the command's exit status is the wrapper's; a
bad command line is refused by name before any burner starts."""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BURNER = REPO / "benchmarks" / "cpu_burner.py"
START_S = 60.0      # a liveness bound for a loaded machine, not a timing assertion


def _alive(pid: int) -> bool:
    """The process exists and is not a zombie (an orphan's zombie waits for a reaper)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _wait_until(what: str, check, timeout: float = START_S):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out after {timeout:g}s waiting for {what}"
        time.sleep(0.05)


def _burner_pids(wrapper: subprocess.Popen[str]) -> list[int]:
    """The pids the wrapper's first stderr line names."""
    assert wrapper.stderr is not None
    ready, _, _ = select.select([wrapper.stderr], [], [], START_S)
    assert ready, "the wrapper printed nothing"
    line = wrapper.stderr.readline()
    assert line.startswith("cpu_burner: 2 burners, pids "), line
    return [int(p) for p in line.split("pids ", 1)[1].split(",", 1)[0].split()]


@contextlib.contextmanager
def _wrapper(tmp_path: Path, ignore_sigterm: bool = False
             ) -> Iterator[tuple[subprocess.Popen[str], list[int], int]]:
    """The wrapper running 2 burners and a command that records its pid and sleeps (ignoring
    SIGTERM if asked); killed, whole, whatever the test did."""
    pidfile = tmp_path / "cmd.pid"
    body = ("import os, signal, sys, time\n"
            f"if {ignore_sigterm}: signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
            f"open({str(pidfile)!r}, 'w').write(str(os.getpid()))\n"
            "time.sleep(600)\n")
    wrapper = subprocess.Popen([sys.executable, str(BURNER), "2", "--grace", "2", "--", sys.executable, "-c", body],
                               stderr=subprocess.PIPE, text=True, start_new_session=True)
    burners: list[int] = []
    command = 0
    try:
        burners = _burner_pids(wrapper)
        command = int(_wait_until("the command's pid file", lambda: pidfile.exists() and pidfile.read_text()))
        yield wrapper, burners, command
    finally:
        if wrapper.poll() is None:
            wrapper.kill()
            wrapper.wait()
        for pid in [*burners, command]:
            if pid and _alive(pid):
                os.kill(pid, signal.SIGKILL)
        assert wrapper.stderr is not None
        wrapper.stderr.close()


@pytest.fixture
def wrapped(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], list[int], int]]:
    with _wrapper(tmp_path) as running:
        yield running


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT], ids=["SIGTERM", "SIGHUP", "SIGINT"])
def test_no_burner_and_no_command_survive_a_stop_signal_to_the_wrapper(
        wrapped: tuple[subprocess.Popen[str], list[int], int], sig: signal.Signals) -> None:
    wrapper, burners, command = wrapped
    assert all(_alive(p) for p in [*burners, command])
    # the burners are in a process group of their own, not the wrapper's
    assert {os.getpgid(p) for p in burners} == {burners[0]} != {os.getpgid(wrapper.pid)}
    os.kill(wrapper.pid, sig)
    status = wrapper.wait(timeout=START_S)
    # the command died of the signal passed on to it: the wrapper exits as a shell would report it
    assert status == 128 + sig, status
    assert not [p for p in [*burners, command] if _alive(p)]


def test_a_command_that_ignores_the_signal_is_killed_after_the_grace(tmp_path: Path) -> None:
    with _wrapper(tmp_path, ignore_sigterm=True) as (wrapper, burners, command):
        os.kill(wrapper.pid, signal.SIGTERM)
        # the burners go at once, while the command still has its grace
        _wait_until("the burners stopped", lambda: not [p for p in burners if _alive(p)])
        status = wrapper.wait(timeout=START_S)
        assert status == 128 + signal.SIGKILL, status
        assert not _alive(command)


def test_a_sigkilled_wrapper_leaves_no_orphan(wrapped: tuple[subprocess.Popen[str], list[int], int]) -> None:
    """No handler runs on SIGKILL: the children's parent-death signal (prctl PR_SET_PDEATHSIG)
    ends them, and a burner that missed it sees its parent gone."""
    wrapper, burners, command = wrapped
    wrapper.kill()
    wrapper.wait()
    _wait_until("every burner and the command gone", lambda: not [p for p in [*burners, command] if _alive(p)],
                timeout=30)


def test_the_commands_exit_status_is_the_wrappers() -> None:
    done = subprocess.run([sys.executable, str(BURNER), "2", "--", sys.executable, "-c", "raise SystemExit(3)"],
                          capture_output=True, text=True, timeout=START_S)
    assert done.returncode == 3, done.stderr
    assert "2 burners stopped" in done.stderr


@pytest.mark.parametrize(("args", "words"), [
    (["nan", "--", "true"], "N: 'nan' is not a whole number"),
    (["inf", "--", "true"], "N: 'inf' is not a whole number"),
    (["9" * 5000, "--", "true"], "is outside 0..64"),
    (["2.5", "--", "true"], "N: '2.5' is not a whole number"),
    (["-1", "--", "true"], "is outside 0..64"),
    (["2", "true"], "put `--` before the command"),
    (["2", "--"], "no command after `--`"),
    (["2", "--grace", "nan", "--", "true"], "--grace: 'nan' is not between 0 and 3600"),
    (["2", "--grace", "1e309", "--", "true"], "is not between 0 and 3600"),
    (["2", "--", "/nonexistent/cmd"], "cannot run '/nonexistent/cmd'"),
], ids=["nan", "inf", "huge", "fraction", "negative", "no-dashes", "no-command", "grace-nan", "grace-inf",
        "missing-command"])
def test_a_bad_command_line_is_refused_by_name(args: list[str], words: str) -> None:
    done = subprocess.run([sys.executable, str(BURNER), *args], capture_output=True, text=True, timeout=START_S)
    assert done.returncode == (127 if "missing" in words or "cannot run" in words else 2), done.stderr
    assert words in done.stderr and "Traceback" not in done.stderr, done.stderr
    # nothing is left burning after a refusal
    if "cannot run" in words:
        assert "2 burners stopped" in done.stderr
    else:
        assert "burners" not in done.stderr
