"""Processes we start, we stop: the one home of process supervision for the sim, the local data
path (gateway/process.py), the Automation API driver (automation/) and the benchmarks.

* Start: `start()` puts a child in a session (and process group) of its own, or in a group the
  caller leads, so one signal reaches it and everything it started, and a terminal's Ctrl-C or
  hang-up reaches only us, who stop the children in order.
* Identity: a pid alone names no process (pids are reused). `Identity` is a pid with its kernel
  start time and, when known, its argv[0]; a recorded process is signalled only while all of them
  still match, and never when it is a zombie, pid 1 or ourselves.
* Stop: `stop_groups()` signals each live target's group (TERM, then KILL after a bound; any
  ladder of signals and bounds), waiting between steps, and returns what it could not stop;
  `stop_trees()` also stops what a target started in sessions of its own and left behind.
* Signals: `handling()` installs one handler for SIGINT, SIGTERM and SIGHUP (HANDLED_SIGNALS) for
  the length of a block and puts the previous ones back; in any thread but the main one it leaves
  them alone (Python delivers signals to the main thread only).
* Leftovers: `remove_tree()` removes a temporary directory whatever is in it; `listen_socket()`
  binds a free loopback port to hand to a child, so no port is free between choosing and serving.

Linux only (/proc). No pulumi import: the core, the program and the tools all call it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any, Protocol, TypeVar

HANDLED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
TERM_GRACE_S = 10.0      # SIGTERM -> SIGKILL, unless the caller names its own bound
KILL_WAIT_S = 5.0        # after SIGKILL: the kernel needs a moment to tear a process down
POLL_S = 0.05

SignalHandler = Callable[[int, FrameType | None], Any] | int | signal.Handlers | None


# --- /proc -------------------------------------------------------------------------------------

def _stat_fields(pid: int) -> list[str] | None:
    """The fields of /proc/<pid>/stat after the command name (which may hold spaces and
    parentheses, hence the last ')'): [0] is the state (field 3), [2] the pgid, [19] the start time."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(errors="replace")
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[-1].split()
    return fields if len(fields) > 19 else None


def start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (field 22 of /proc/<pid>/stat), or None
    when no such process exists. With the pid it identifies a process across pid reuse."""
    fields = _stat_fields(pid)
    return fields[19] if fields else None


def state(pid: int) -> str | None:
    """The process's state letter (R, S, Z, ...), None when there is no such process."""
    fields = _stat_fields(pid)
    return fields[0] if fields else None


def command_line(pid: int) -> list[str] | None:
    """The process's argv as the kernel records it (/proc/<pid>/cmdline), or None."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    return [a.decode(errors="replace") for a in raw.split(b"\0")[:-1]] or None


@dataclass(frozen=True)
class Identity:
    """A process as recorded: pid, kernel start time and (when known) argv[0]. `alive()` is true
    only while the same process runs: a record from a damaged or forged state file, or a pid reused
    by another program, is never signalled."""

    pid: int
    start: str
    argv0: str | None = None

    @classmethod
    def of(cls, pid: int, argv0: str | None = None) -> Identity | None:
        """The identity of the running process `pid`, None when there is none."""
        start = start_time(pid)
        return cls(pid, start, argv0) if start is not None else None

    def alive(self) -> bool:
        if self.pid <= 1 or self.pid == os.getpid():
            return False
        if start_time(self.pid) != self.start or state(self.pid) in (None, "Z"):
            return False
        if self.argv0 is None:
            return True
        argv = command_line(self.pid)
        return argv is not None and argv[0] == self.argv0


class Target(Protocol):
    """What `stop_groups` stops: a pid and whether that very process still runs (a child of ours
    also reaps itself in `alive()`)."""

    @property
    def pid(self) -> int: ...

    def alive(self) -> bool: ...


T = TypeVar("T", bound=Target)


class Child:
    """A child we started (its Popen): alive until it has exited and been reaped."""

    def __init__(self, popen: subprocess.Popen[Any]) -> None:
        self.popen = popen

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None


# --- start and stop ----------------------------------------------------------------------------

def start(argv: Sequence[str], *, group: int | None = None, **popen: Any) -> subprocess.Popen[Any]:  # noqa: ANN401 - Popen's own keywords
    """Popen `argv` in a new session (it leads its own process group: pgid == pid), or in the
    existing process group `group`. Every other keyword goes to Popen as it is."""
    placement: dict[str, Any] = {"process_group": group} if group is not None else {"start_new_session": True}
    return subprocess.Popen(list(argv), **placement, **popen)


def signal_group(pid: int, sig: int) -> bool:
    """Send `sig` to the group `pid` leads, or to `pid` alone when it leads none (it moved to a
    group of its own, or joined another one). False when there was no such process to signal."""
    try:
        if os.getpgid(pid) == pid:
            os.killpg(pid, sig)
        else:
            os.kill(pid, sig)
    except ProcessLookupError:
        return False
    except PermissionError:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            return False
    return True


def kill_group(pgid: int, sig: int) -> None:
    """`killpg` that is quiet when the group is gone: for a group whose leader we started and that
    may have exited while members remain (the group cannot be reused while any member lives)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def wait_gone(targets: Sequence[Target], timeout: float) -> bool:
    """Wait up to `timeout` seconds for every target to stop; True when none is left."""
    deadline = time.monotonic() + timeout
    while True:
        if not any(t.alive() for t in targets):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(POLL_S)


def stop_groups(targets: Sequence[T], grace: float = TERM_GRACE_S, *,
                ladder: Sequence[tuple[int, float]] | None = None) -> list[T]:
    """Stop the targets' process groups: SIGTERM, wait up to `grace` seconds, SIGKILL what is
    left, wait up to KILL_WAIT_S. `ladder` replaces that sequence with its own (signal, seconds to
    wait after it) steps, e.g. SIGINT first for a CLI that cancels on Ctrl-C. Each target is checked
    to still be the same process right before each signal. Returns the targets still running."""
    steps = ladder if ladder is not None else ((signal.SIGTERM, grace), (signal.SIGKILL, KILL_WAIT_S))
    live = [t for t in targets if t.alive()]
    for sig, wait in steps:
        live = [t for t in live if t.alive()]
        if not live:
            break
        for t in live:
            if t.alive():
                signal_group(t.pid, sig)
        wait_gone(live, wait)
    return [t for t in live if t.alive()]


def left_in_session(sid: int) -> list[int]:
    """The processes of session `sid` that do not lead one (field 6 of /proc/<pid>/stat): after the
    leader we started in that session has exited, what it left behind. The Pulumi CLI starts each
    plugin in a process group of its own but in its session, and a CLI that exits without stopping
    one leaves it running under init. The kernel does not hand out a pid still naming a session,
    and a session leader (pid == sid) is never counted, so nothing unrelated is named."""
    return [pid for pid, _, session in _proc_stats() if pid != sid and session == sid]


def _proc_stats() -> Iterator[tuple[int, int, int]]:
    """(pid, parent pid, session) of every process readable now, from /proc/<pid>/stat (one scan;
    a process gone meanwhile is left out)."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                stat = fh.read()
            # the command name may hold spaces and parentheses: fields start after the last ')'
            fields = stat[stat.rindex(b")") + 2:].split()   # state, ppid, pgrp, session, ...
            ppid, session = int(fields[1]), int(fields[3])
        except (OSError, ValueError, IndexError):
            continue
        yield int(entry), ppid, session


def descendant_pids(root: int) -> list[int]:
    """`root` and every process below it, by parent pid (one scan of /proc): a snapshot, since a
    process whose parent exits moves under init and out of the tree."""
    kids: dict[int, list[int]] = {}
    for pid, ppid, _ in _proc_stats():
        kids.setdefault(ppid, []).append(pid)
    # the scan is not atomic: a pid freed and reused during it could close a loop
    out, seen, todo = [], {root}, [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        fresh = [kid for kid in kids.get(pid, ()) if kid not in seen]
        seen.update(fresh)
        todo.extend(fresh)
    return out


def stop_trees(targets: Sequence[Target], ladder: Sequence[tuple[int, float]]) -> list[int]:
    """`stop_groups` along `ladder`, and then every descendant of a target seen while that target
    lived that still runs: SIGTERM, wait up to TERM_GRACE_S, SIGKILL. That reaches the processes
    a target put in sessions of their own and left behind when it died (the Pulumi CLI starts
    each plugin in a group of its own and stops them itself only if it lives long enough: a
    SIGKILLed CLI leaves its language host and providers running under init). The descendants
    are recorded before each step of the ladder. Returns the pids still running."""
    seen: dict[int, Identity] = {}

    def record() -> None:
        for target in targets:
            if target.alive():
                for pid in descendant_pids(target.pid)[1:]:
                    ident = seen.get(pid) or Identity.of(pid)
                    if ident is not None:
                        seen[pid] = ident

    live = [t for t in targets if t.alive()]
    for step in ladder:
        record()
        live = stop_groups(live, ladder=(step,))
        if not live:
            break
    left_behind = [ident for ident in seen.values() if ident.alive()]
    return [t.pid for t in live] + [ident.pid for ident in stop_groups(left_behind)]


def reap(popen: subprocess.Popen[Any], timeout: float = 1.0) -> None:
    """Collect a stopped child's exit status (bounded) so it leaves no zombie."""
    with contextlib.suppress(subprocess.TimeoutExpired):
        popen.wait(timeout=timeout)


# --- signals -----------------------------------------------------------------------------------

@contextmanager
def handling(handler: SignalHandler, signals: Sequence[int] = HANDLED_SIGNALS) -> Iterator[None]:
    """`handler` (a function, or signal.SIG_IGN) for `signals` during the block; the previous
    handlers afterwards. Off the main thread it changes nothing: Python delivers signals to the
    main thread only, and there the caller owns them."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.signal(s, handler) for s in signals}
    try:
        yield
    finally:
        for s, old in previous.items():
            signal.signal(s, old)


def signal_name(signum: int) -> str:
    return signal.Signals(signum).name


# --- leftovers ---------------------------------------------------------------------------------

def remove_tree(path: Path | str) -> None:
    """Remove a directory we created and everything in it; a missing one is fine. A symlink is
    unlinked, never followed."""
    p = Path(path)
    if p.is_symlink():
        p.unlink(missing_ok=True)
    else:
        shutil.rmtree(p, ignore_errors=True)


def listen_socket(host: str = "127.0.0.1") -> socket.socket:
    """A listening TCP socket on a free port of `host`, to hand to a child process."""
    s = socket.socket()
    try:
        s.bind((host, 0))
        s.listen(128)
    except BaseException:
        s.close()
        raise
    return s


def port_of(s: socket.socket) -> int:
    port: int = s.getsockname()[1]
    return port
