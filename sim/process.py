"""Processes the sim starts: each in its own session (so its whole process group can be signalled),
its output in a log file, and its identity (pid + kernel start time) recorded so that a later
`sim down`, from another process, stops exactly what was started and nothing else."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

STOP_GRACE_S = 10.0


def start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (field 22 of /proc/<pid>/stat), or None
    when no such process exists. Together with the pid it identifies a process across pid reuse."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    return fields[19] if len(fields) > 19 else None


def command_line(pid: int) -> list[str] | None:
    """The process's argv as the kernel records it (/proc/<pid>/cmdline), or None."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    return [a.decode(errors="replace") for a in raw.split(b"\0")[:-1]] or None


def _state(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


@dataclass
class Proc:
    """One started process; `popen` is set only inside the process that started it."""

    name: str
    pid: int
    start: str
    log: str
    argv0: str
    popen: subprocess.Popen[bytes] | None = None

    def record(self) -> dict[str, str | int]:
        return {"name": self.name, "pid": self.pid, "start": self.start, "log": self.log, "argv0": self.argv0}

    @classmethod
    def from_record(cls, rec: dict[str, str | int]) -> Proc:
        return cls(str(rec["name"]), int(rec["pid"]), str(rec["start"]), str(rec["log"]), str(rec["argv0"]))

    def alive(self) -> bool:
        """Still this very process and not a zombie: the same pid, start time and command (its
        recorded argv[0]), so a record from a damaged or forged sim.json, or a pid reused by
        another program, is never signalled."""
        if self.popen is not None and self.popen.poll() is not None:
            return False
        if self.pid <= 1 or self.pid == os.getpid():
            return False
        if start_time(self.pid) != self.start or _state(self.pid) in (None, "Z"):
            return False
        if self.popen is not None:
            # Our own child: no need to ask, and right after exec the kernel may not have set up its
            # argv yet (Popen returns once the exec closed its pipe; /proc/<pid>/cmdline reads empty
            # until the new image's arguments are in place).
            return True
        argv = command_line(self.pid)
        return argv is not None and argv[0] == self.argv0

    def exit_code(self) -> int | None:
        return self.popen.poll() if self.popen is not None else None

    def log_tail(self, lines: int = 15) -> str:
        try:
            text = Path(self.log).read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return "\n".join(text[-lines:])


def spawn(name: str, argv: list[str], log: Path, env: dict[str, str] | None = None) -> Proc:
    """Start `argv` in a new session with stdout+stderr to `log` (appended)."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        popen = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                 start_new_session=True, env={**os.environ, **(env or {})})
    # A just-forked child always has a /proc entry until it is reaped; the fallback is never used.
    start = start_time(popen.pid) or "0"
    return Proc(name, popen.pid, start, str(log), argv[0], popen)


# Stop order: clients of the API server first, then the API server, then its storage; an API
# server whose etcd is already gone waits on it instead of shutting down.
STOP_TIERS = (("lws-controller", "kwok", "kube-scheduler", "kube-controller-manager"), ("kube-apiserver",), ("etcd",))


def stop(procs: list[Proc], grace: float = STOP_GRACE_S) -> list[str]:
    """Stop the processes tier by tier (STOP_TIERS; unknown names first): SIGTERM each live
    process group, SIGKILL what is left after `grace` seconds; reap our own children.
    Returns the names of processes that could not be stopped."""
    known = {name for tier in STOP_TIERS for name in tier}
    tiers = [[p for p in procs if p.name not in known]]
    tiers += [[p for p in procs if p.name in tier] for tier in STOP_TIERS]
    left: list[str] = []
    for tier in tiers:
        left += _stop_tier(tier, grace)
    for p in procs:
        if p.popen is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.popen.wait(timeout=1.0)
    return left


def _stop_tier(procs: list[Proc], grace: float) -> list[str]:
    live = [p for p in procs if p.alive()]
    for p in live:
        _signal_group(p, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while any(p.alive() for p in live) and time.monotonic() < deadline:
        _reap(live)
        time.sleep(0.05)
    for p in live:
        if p.alive():
            _signal_group(p, signal.SIGKILL)
    deadline = time.monotonic() + 5.0
    while any(p.alive() for p in live) and time.monotonic() < deadline:
        _reap(live)
        time.sleep(0.05)
    return [p.name for p in live if p.alive()]


def _reap(procs: list[Proc]) -> None:
    for p in procs:
        if p.popen is not None:
            p.popen.poll()


def _signal_group(p: Proc, sig: signal.Signals) -> None:
    if not p.alive():
        return                               # checked again right before each signal
    try:
        # Each process leads its own session and group (start_new_session), so pgid == pid;
        # one that no longer leads its group gets the signal alone.
        if os.getpgid(p.pid) == p.pid:
            os.killpg(p.pid, sig)
        else:
            os.kill(p.pid, sig)
    except ProcessLookupError:
        pass
    except PermissionError:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(p.pid, sig)
