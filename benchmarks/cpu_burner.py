"""Run a command while N busy processes load the CPUs: the "busy 2-core machine" of issue 26, in
pure Python (no stress-ng needed).

    .venv/bin/python benchmarks/cpu_burner.py 2 -- .venv/bin/python -m pytest tests/sim/test_gang_zone.py -q

Each burner is a `python -c` loop in one process group of their own (so a terminal's Ctrl-C,
sent to the foreground group, does not reach them, and the wrapper stops them all with one
killpg). The command runs in a process group of its own too: SIGINT, SIGTERM and SIGHUP sent to
the wrapper are passed to that group once, the burners are stopped at once, and the wrapper
waits for the command (SIGKILL to its group after --grace seconds) and exits with its status
(128 + N when a signal N ended it). Nothing outlives the wrapper: the burners and the command
get a parent-death signal (Linux prctl PR_SET_PDEATHSIG: SIGKILL for the burners, SIGTERM for
the command), so even a SIGKILL of the wrapper leaves no orphan, and each burner also exits
when it sees its parent gone. The command's own group is why it should not read the terminal.

Prints one line to stderr when the burners start (their pids and process group) and one when
they stop.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from types import FrameType

MAX_BURNERS = 64
PR_SET_PDEATHSIG = 1
STOPPING = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

# A pure Python busy loop: dies with its parent (PR_SET_PDEATHSIG, and a look at getppid() every
# million turns where prctl is missing), ignores the terminal's SIGINT.
BURN = """
import ctypes, os, signal, sys
signal.signal(signal.SIGINT, signal.SIG_IGN)
try:
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)
except (OSError, AttributeError):
    pass
parent = int(sys.argv[1])
if os.getppid() != parent:
    sys.exit(0)
n = 0
while True:
    n += 1
    if n % 1_000_000 == 0 and os.getppid() != parent:
        sys.exit(0)
"""


class Usage(Exception):
    """A bad command line: the message names the argument and the fix."""


def _pdeathsig(sig: int) -> None:
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, sig)


def _signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, sig)


def parse(argv: Sequence[str]) -> tuple[int, float, list[str]]:
    """(burners, grace seconds, command) from `N [--grace S] -- CMD...`."""
    argv = list(argv)
    if "--" not in argv:
        raise Usage("expected `N -- CMD...`: put `--` before the command to run")
    split = argv.index("--")
    command = argv[split + 1:]
    if not command:
        raise Usage("no command after `--`: give the command to run under load")
    parser = argparse.ArgumentParser(prog="cpu_burner.py", add_help=True)
    parser.add_argument("burners", help=f"busy processes to run, 0..{MAX_BURNERS}")
    parser.add_argument("--grace", default="30", help="seconds the command gets after a stop signal (default 30)")
    try:
        args = parser.parse_args(argv[:split])
    except SystemExit as exc:
        if exc.code == 0:               # --help
            raise
        raise Usage("usage: cpu_burner.py N [--grace S] -- CMD...") from exc
    text = args.burners.strip()
    if not text.lstrip("+-").isdigit():
        raise Usage(f"N: {text[:40]!r} is not a whole number; give 0..{MAX_BURNERS}")
    if len(text) > 6 or not 0 <= int(text) <= MAX_BURNERS:     # never int() of a 5,000-digit string
        raise Usage(f"N: {text[:40]}{'...' if len(text) > 40 else ''} is outside 0..{MAX_BURNERS}; "
                    "a 2-core machine under load is N=2")
    burners = int(text)
    try:
        grace = float(args.grace)
    except ValueError:
        raise Usage(f"--grace: {args.grace[:40]!r} is not a number of seconds") from None
    if not 0 <= grace <= 3600:      # NaN fails both comparisons, inf the second
        raise Usage(f"--grace: {args.grace[:40]!r} is not between 0 and 3600 seconds")
    return burners, grace, command


def start_burners(count: int) -> list[subprocess.Popen[bytes]]:
    """`count` burners in one new process group (the first one's pid)."""
    procs: list[subprocess.Popen[bytes]] = []
    group = 0
    try:
        for _ in range(count):
            proc = subprocess.Popen([sys.executable, "-c", BURN, str(os.getpid())], stdin=subprocess.DEVNULL,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, process_group=group)
            procs.append(proc)
            group = group or proc.pid
    except BaseException:
        stop_burners(procs)
        raise
    return procs


def stop_burners(procs: list[subprocess.Popen[bytes]]) -> None:
    if not procs:
        return
    _signal_group(procs[0].pid, signal.SIGKILL)
    for proc in procs:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
        proc.wait()


def exit_status(returncode: int) -> int:
    return 128 - returncode if returncode < 0 else returncode


def run(burners: int, grace: float, command: list[str]) -> int:
    received: list[int] = []

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        received.append(signum)

    previous = {sig: signal.signal(sig, on_signal) for sig in STOPPING}
    procs: list[subprocess.Popen[bytes]] = []
    child: subprocess.Popen[bytes] | None = None
    try:
        procs = start_burners(burners)
        if procs:
            print(f"cpu_burner: {len(procs)} burners, pids {' '.join(str(p.pid) for p in procs)}, "
                  f"process group {procs[0].pid}", file=sys.stderr, flush=True)
        if not received:
            try:
                child = subprocess.Popen(command, process_group=0,
                                         preexec_fn=lambda: _pdeathsig(signal.SIGTERM))
            except OSError as exc:
                print(f"cpu_burner: cannot run {command[0][:200]!r}: {exc.strerror}", file=sys.stderr)
                return 127
        forwarded = False
        deadline: float | None = None
        while child is not None:
            if received and not forwarded:
                forwarded = True
                stop_burners(procs)
                _signal_group(child.pid, received[0])
                deadline = time.monotonic() + grace
            try:
                return exit_status(child.wait(timeout=0.2))
            except subprocess.TimeoutExpired:
                pass
            if deadline is not None and time.monotonic() > deadline:
                print(f"cpu_burner: {command[0][:200]} still running {grace:g}s after the signal: SIGKILL",
                      file=sys.stderr)
                _signal_group(child.pid, signal.SIGKILL)
                return exit_status(child.wait())
        return 128 + received[0] if received else 0
    finally:
        stop_burners(procs)
        if procs:
            print(f"cpu_burner: {len(procs)} burners stopped", file=sys.stderr, flush=True)
        if child is not None and child.poll() is None:       # an exception above: never leave it running
            _signal_group(child.pid, signal.SIGKILL)
            child.wait()
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def main(argv: Sequence[str] | None = None) -> int:
    try:
        burners, grace, command = parse(sys.argv[1:] if argv is None else argv)
    except Usage as exc:
        print(f"cpu_burner: {exc}", file=sys.stderr)
        return 2
    return run(burners, grace, command)


if __name__ == "__main__":
    sys.exit(main())
