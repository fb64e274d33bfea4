"""Processes the sim starts: each in its own session (so its whole process group can be signalled),
its output in a log file, and its identity (pid + kernel start time) recorded so that a later
`sim down`, from another process, stops exactly what was started and nothing else."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from modelplane.processes import Identity, reap, start, start_time, stop_groups

# start_time is modelplane.processes's; the sim's state file and its tests read it from here.
__all__ = ["STOP_GRACE_S", "STOP_TIERS", "Proc", "spawn", "start_time", "stop"]

STOP_GRACE_S = 10.0


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
        # Our own child needs no argv check; right after exec the kernel may not have set its argv
        # up yet (Popen returns once the exec closed its pipe; /proc/<pid>/cmdline reads empty
        # until the new image's arguments are in place).
        return Identity(self.pid, self.start, None if self.popen is not None else self.argv0).alive()

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
        popen = start(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                      env={**os.environ, **(env or {})})
    # A just-forked child always has a /proc entry until it is reaped; the fallback is never used.
    started = start_time(popen.pid) or "0"
    return Proc(name, popen.pid, started, str(log), argv[0], popen)


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
        left += [p.name for p in stop_groups(tier, grace)]
    for p in procs:
        if p.popen is not None:
            reap(p.popen)
    return left
