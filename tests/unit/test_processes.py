"""modelplane.processes, the one home of process supervision: what it stops, what it must never
signal, and what it leaves behind. Each case starts real (short) processes: a pid, a group and a
signal are kernel facts a mock would only pretend."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from modelplane.processes import (
    HANDLED_SIGNALS,
    Child,
    Identity,
    command_line,
    descendant_pids,
    handling,
    listen_socket,
    port_of,
    remove_tree,
    signal_group,
    start,
    start_time,
    stop_groups,
    stop_trees,
)

PY = sys.executable
IGNORES_TERM = ("import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                "print('ready', flush=True); time.sleep(60)")
SLEEPS = "import time; print('ready', flush=True); time.sleep(60)"
# A child that starts a grandchild in its own group, prints the grandchild's pid and waits.
FORKS = ("import subprocess, sys, time; g = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
         "print(g.pid, flush=True); time.sleep(60)")
# The same, the grandchild in a session of its own (as the Pulumi CLI starts its plugins).
FORKS_A_SESSION = FORKS.replace("time.sleep(60)'])", "time.sleep(60)'], start_new_session=True)")


lines: dict[int, str] = {}   # pid -> the first line the child printed


def _running(pid: int) -> bool:
    """Alive and not a zombie (a reaped or exited process is not running)."""
    ident = Identity.of(pid)
    return ident is not None and ident.alive()


@pytest.fixture
def spawned() -> Iterator[Callable[..., subprocess.Popen[str]]]:
    """Start python -c CODE in its own group, waiting for its first line; everything it started is
    killed afterwards whatever the test did (the test's own assertion must not leave orphans)."""
    started: list[subprocess.Popen[str]] = []

    def spawn(code: str, **kw: object) -> subprocess.Popen[str]:
        p: subprocess.Popen[str] = start([PY, "-c", code], stdout=subprocess.PIPE, text=True, **kw)
        started.append(p)
        assert p.stdout is not None
        lines[p.pid] = p.stdout.readline().strip()
        return p

    yield spawn
    for p in started:
        if p.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)
        p.wait(5)


# --- stop_groups: what is stopped --------------------------------------------------------------

@pytest.mark.parametrize(("code", "grace", "why"), [
    pytest.param(SLEEPS, 5.0, "SIGTERM is enough", id="a-child-that-obeys-term-stops-at-once"),
    pytest.param(IGNORES_TERM, 0.3, "SIGKILL after the bound", id="a-child-that-ignores-term-is-killed"),
])
def test_stop_groups_stops_the_child(spawned: Callable[..., subprocess.Popen[str]], code: str, grace: float,
                                     why: str) -> None:
    child = spawned(code)
    begun = time.monotonic()
    left = stop_groups([Child(child)], grace)
    assert left == [], why
    assert child.poll() is not None
    assert time.monotonic() - begun < grace + 5.0      # bounded: TERM's grace, then KILL's wait


def test_a_child_that_ignores_term_dies_of_sigkill(spawned: Callable[..., subprocess.Popen[str]]) -> None:
    child = spawned(IGNORES_TERM)
    stop_groups([Child(child)], 0.2)
    assert child.returncode == -signal.SIGKILL


def test_a_grandchild_in_the_group_is_gone(spawned: Callable[..., subprocess.Popen[str]]) -> None:
    child = spawned(FORKS)
    grandchild = int(lines[child.pid])
    assert _running(grandchild) and os.getpgid(grandchild) == child.pid
    ident = Identity.of(grandchild)
    assert stop_groups([Child(child)], 5.0) == []
    deadline = time.monotonic() + 5.0                   # reparented to init, reaped there
    while ident is not None and ident.alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert ident is not None and not ident.alive()


def _gone_within(ident: Identity | None, seconds: float) -> bool:
    deadline = time.monotonic() + seconds               # reparented to init, reaped there
    while ident is not None and ident.alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    return ident is None or not ident.alive()


def test_descendant_pids_is_the_root_then_everything_below_it(spawned: Callable[..., subprocess.Popen[str]]) -> None:
    child = spawned(FORKS_A_SESSION)
    grandchild = int(lines[child.pid])
    assert descendant_pids(child.pid) == [child.pid, grandchild]    # its own session: still below it
    assert descendant_pids(grandchild) == [grandchild]
    with contextlib.suppress(ProcessLookupError):
        os.killpg(grandchild, signal.SIGKILL)


def test_stop_groups_leaves_a_grandchild_in_a_session_of_its_own(
        spawned: Callable[..., subprocess.Popen[str]]) -> None:
    """Why stop_trees exists: a group's signal misses what left the group."""
    child = spawned(FORKS_A_SESSION)
    grandchild = Identity.of(int(lines[child.pid]))
    assert grandchild is not None and os.getpgid(grandchild.pid) == grandchild.pid
    try:
        assert stop_groups([Child(child)], 5.0) == []
        assert grandchild.alive()
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(grandchild.pid, signal.SIGKILL)


@pytest.mark.parametrize("ladder", [
    pytest.param(((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)), id="term-then-kill"),
    pytest.param(((signal.SIGKILL, 5.0),), id="killed-at-once-leaving-its-children"),
])
def test_stop_trees_stops_what_the_child_left_in_a_session_of_its_own(
        spawned: Callable[..., subprocess.Popen[str]], ladder: tuple[tuple[int, float], ...]) -> None:
    child = spawned(FORKS_A_SESSION)
    grandchild = Identity.of(int(lines[child.pid]))
    try:
        assert stop_trees([Child(child)], ladder) == []
        assert child.poll() is not None
        assert _gone_within(grandchild, 5.0)
    finally:
        if grandchild is not None and grandchild.alive():
            os.killpg(grandchild.pid, signal.SIGKILL)


def test_a_ladder_sends_its_own_signals_in_order(spawned: Callable[..., subprocess.Popen[str]]) -> None:
    """SIGINT first (a CLI cancels on Ctrl-C): a child that obeys it never sees SIGTERM.

    The SIGINT step's wait is generous (a loaded machine); stop_groups returns as soon as the child
    is gone, so it costs nothing here."""
    # The child takes SIGINT itself: a pytest started in the background by a non-interactive shell
    # inherits SIGINT ignored, and so would a child left with the default (that was the flake).
    child = spawned("import signal; signal.signal(signal.SIGINT, signal.default_int_handler); " + SLEEPS)
    assert stop_groups([Child(child)], ladder=((signal.SIGINT, 60.0), (signal.SIGKILL, 5.0))) == []
    assert child.returncode in (-signal.SIGINT, 1), child.returncode   # KeyboardInterrupt in python -c exits 1


# --- identity: what is never signalled ---------------------------------------------------------

@pytest.mark.parametrize(("change", "why"), [
    pytest.param(lambda i: Identity(i.pid, i.start, "/bin/not-what-we-started"), "argv[0] differs",
                 id="a-recorded-pid-whose-cmdline-differs"),
    pytest.param(lambda i: Identity(i.pid, str(int(i.start) - 1), i.argv0), "started at another time",
                 id="a-recorded-pid-reused-by-a-later-process"),
    pytest.param(lambda i: Identity(1, i.start, None), "pid 1", id="init"),
    pytest.param(lambda i: Identity(os.getpid(), start_time(os.getpid()) or "", None), "ourselves",
                 id="the-supervisor-itself"),
])
def test_a_record_that_is_not_the_process_is_not_signalled(
        spawned: Callable[..., subprocess.Popen[str]], change: Callable[[Identity], Identity], why: str) -> None:
    victim = spawned(SLEEPS)
    recorded = Identity.of(victim.pid, PY)
    assert recorded is not None and recorded.alive()     # the true record would be stopped
    forged = change(recorded)
    assert not forged.alive(), why
    assert stop_groups([forged], 0.2) == []
    time.sleep(0.2)
    assert victim.poll() is None, f"{why}: the process was signalled"


def test_identity_reads_the_kernel_record(spawned: Callable[..., subprocess.Popen[str]]) -> None:
    child = spawned(SLEEPS)
    argv = command_line(child.pid)
    assert argv is not None and argv[:2] == [PY, "-c"]
    assert Identity.of(child.pid, PY) == Identity(child.pid, start_time(child.pid) or "?", PY)
    stop_groups([Child(child)])
    assert start_time(child.pid) is None and command_line(child.pid) is None


def test_signal_group_signals_a_member_alone_when_it_leads_no_group(
        spawned: Callable[..., subprocess.Popen[str]]) -> None:
    leader = spawned(SLEEPS, group=0)                  # a new group in our session, as the gateway's watchdog
    member = spawned(SLEEPS, group=leader.pid)
    assert os.getpgid(member.pid) == leader.pid
    assert signal_group(member.pid, signal.SIGKILL)
    member.wait(5)
    assert leader.poll() is None                        # its group's leader is untouched


def test_signal_group_says_when_there_is_no_process() -> None:
    p = start([PY, "-c", "pass"])
    p.wait(10)
    assert signal_group(p.pid, signal.SIGTERM) is False


# --- signals -----------------------------------------------------------------------------------

def test_handling_installs_then_restores_every_handled_signal() -> None:
    def mine(_s: int, _f: object) -> None:
        pass

    before = {s: signal.getsignal(s) for s in HANDLED_SIGNALS}
    with handling(mine):
        assert {s: signal.getsignal(s) for s in HANDLED_SIGNALS} == dict.fromkeys(HANDLED_SIGNALS, mine)
    assert {s: signal.getsignal(s) for s in HANDLED_SIGNALS} == before


def test_handling_restores_the_handlers_when_the_block_raises() -> None:
    before = signal.getsignal(signal.SIGHUP)
    with pytest.raises(RuntimeError), handling(signal.SIG_IGN, (signal.SIGHUP,)):
        raise RuntimeError
    assert signal.getsignal(signal.SIGHUP) == before


def test_handling_off_the_main_thread_changes_nothing() -> None:
    before = signal.getsignal(signal.SIGTERM)
    seen: list[object] = []

    def worker() -> None:
        with handling(signal.SIG_IGN, (signal.SIGTERM,)):
            seen.append(signal.getsignal(signal.SIGTERM))

    t = threading.Thread(target=worker)
    t.start()
    t.join()
    assert seen == [before]


def test_a_handled_signal_reaches_the_handler() -> None:
    got: list[int] = []
    with handling(lambda s, _f: got.append(s), (signal.SIGHUP,)):
        os.kill(os.getpid(), signal.SIGHUP)
        time.sleep(0.05)
    assert got == [signal.SIGHUP]


# --- leftovers ---------------------------------------------------------------------------------

def test_remove_tree_removes_a_directory_and_everything_in_it(tmp_path: Path) -> None:
    d = tmp_path / "work"
    (d / "a" / "b").mkdir(parents=True)
    (d / "a" / "b" / "secret").write_text("x")
    remove_tree(d)
    remove_tree(d)                                       # already gone: no error
    assert not d.exists()


def test_remove_tree_unlinks_a_symlink_and_never_follows_it(tmp_path: Path) -> None:
    target = tmp_path / "theirs"
    target.mkdir()
    (target / "keep").write_text("x")
    link = tmp_path / "link"
    link.symlink_to(target, target_is_directory=True)
    remove_tree(link)
    assert not link.exists() and (target / "keep").exists()


def test_listen_socket_holds_a_free_port_until_closed() -> None:
    with listen_socket() as s:
        port = port_of(s)
        assert port > 0
        other = socket.socket()
        with pytest.raises(OSError), other:
            other.bind(("127.0.0.1", port))
