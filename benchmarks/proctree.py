"""Run a command and measure its whole process tree: wall time, peak memory of the tree
(the sum of every live descendant's proportional set size, sampled), and CPU seconds per role (the Pulumi
engine, our program, the dynamic provider, the Kubernetes provider, ...).

The child leads its own process group; on a timeout, an error or Ctrl-C the group and
every descendant seen are terminated (then killed), so a benchmark leaves nothing behind.
Linux only (reads /proc).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from modelplane.processes import (  # noqa: E402
    KILL_WAIT_S,
    Identity,
    command_line,
    descendant_pids,
    kill_group,
    start,
    stop_groups,
)

CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")
SAMPLE_SECONDS = 0.2
GRACE_SECONDS = 30.0   # between SIGTERM and SIGKILL: pulumi cancels an operation gracefully


def role_of(cmdline: Sequence[str]) -> str:
    """Which part of a Pulumi run a process is, from its command line."""
    text = " ".join(cmdline)
    exe = os.path.basename(cmdline[0]) if cmdline else ""
    if "pulumi-resource-kubernetes" in text:
        return "kubernetes provider"
    if "pulumi.dynamic" in text or "pulumi-resource-pulumi-python" in text:
        return "dynamic provider"
    if "pulumi.policy" in text:
        return "policy pack"
    if "pulumi-language-python-exec" in text:
        return "program"
    if exe == "pulumi-language-python":
        return "language host"
    if exe == "pulumi":
        return "engine"
    return "other"


@dataclass
class TreeRun:
    argv: list[str]
    returncode: int
    wall: float
    peak_memory: int                                # bytes: the tree's PSS sum at its peak
    cpu: dict[str, float] = field(default_factory=dict)   # role -> CPU seconds (user + system)
    processes: dict[str, int] = field(default_factory=dict)   # role -> processes seen
    stdout: str = ""
    stderr: str = ""
    timed_out: bool = False

    @property
    def cpu_total(self) -> float:
        return sum(self.cpu.values())


def _memory(pid: int) -> int:
    """Proportional set size: resident pages, shared ones divided among their sharers,
    so 100 Kubernetes provider processes mapping one 167 MB binary are not counted 100
    times (RSS would). RSS where smaps_rollup is unavailable."""
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as fh:
            for line in fh:
                if line.startswith(b"Pss:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    with open(f"/proc/{pid}/statm", "rb") as fh:
        return int(fh.read().split()[1]) * PAGE


def _sample(pid: int) -> tuple[float, int] | None:
    """(CPU seconds, memory bytes) of one process, None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()
        memory = _memory(pid)
    except (OSError, IndexError, ValueError):
        return None
    # fields[0] is the state (field 3); utime and stime are fields 14 and 15
    return (int(fields[11]) + int(fields[12])) / CLK_TCK, memory


class _Sampler(threading.Thread):
    def __init__(self, root: int, classify: Callable[[Sequence[str]], str]) -> None:
        super().__init__(daemon=True)
        self.root = root
        self.classify = classify
        self.stop = threading.Event()
        self.cpu: dict[int, float] = {}
        self.roles: dict[int, str] = {}
        self.started: dict[int, Identity | None] = {}
        self.peak = 0

    def run(self) -> None:
        while not self.stop.is_set():
            self.once()
            self.stop.wait(SAMPLE_SECONDS)

    def once(self) -> None:
        total = 0
        for pid in descendant_pids(self.root):
            got = _sample(pid)
            if got is None:
                continue
            cpu, rss = got
            if self.roles.get(pid, "other") == "other":
                # until it has exec'd, a fresh child still shows its parent's command line
                self.roles[pid] = self.classify(command_line(pid) or [])
                self.started[pid] = Identity.of(pid)
            self.cpu[pid] = max(cpu, self.cpu.get(pid, 0.0))
            total += rss
        self.peak = max(self.peak, total)


def _terminate(pgid: int, seen: Mapping[int, Identity | None], grace: float = GRACE_SECONDS) -> None:
    """SIGTERM the child's process group and every descendant seen that still runs (same
    pid, same start time: also those that left the group, like the pulumi processes a
    driver starts in sessions of their own), wait up to `grace` seconds for them to stop
    (a driver cancels its engines first), then SIGKILL what is left."""
    alive = [ident for ident in seen.values() if ident is not None and ident.alive()]
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, KILL_WAIT_S)):
        kill_group(pgid, sig)   # the group outlives its leader while a member runs
        alive = stop_groups(alive, ladder=((sig, wait),))


def run_tree(argv: Sequence[str], *, env: Mapping[str, str] | None = None, cwd: str | None = None,
             timeout: float | None = None, classify: Callable[[Sequence[str]], str] = role_of) -> TreeRun:
    """Run `argv` to completion (or `timeout` seconds) and measure its tree."""
    begun = time.perf_counter()
    proc = start(argv, env=dict(env) if env is not None else None, cwd=cwd,
                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    sampler = _Sampler(proc.pid, classify)
    sampler.start()
    timed_out = False
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        sampler.once()
        _terminate(proc.pid, dict(sampler.started))
        out, err = proc.communicate()
    except BaseException:
        sampler.once()
        _terminate(proc.pid, dict(sampler.started))
        proc.wait()
        raise
    finally:
        sampler.stop.set()
        sampler.join()
    wall = time.perf_counter() - begun
    # Plugins the engine left running (it should not): ours to stop all the same.
    leftovers = {pid: t for pid, t in sampler.started.items() if pid != proc.pid and t is not None and t.alive()}
    if leftovers:
        _terminate(proc.pid, leftovers, grace=5)
    cpu: dict[str, float] = {}
    count: dict[str, int] = {}
    for pid, seconds in sampler.cpu.items():
        role = sampler.roles[pid]
        cpu[role] = cpu.get(role, 0.0) + seconds
        count[role] = count.get(role, 0) + 1
    return TreeRun(list(argv), proc.returncode, wall, sampler.peak, cpu, count, out, err, timed_out)
