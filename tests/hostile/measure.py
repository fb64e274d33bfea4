"""Run `python -m modelplane ...` as a child and measure it: wall time and its peak RSS.

The peak is read by a small launcher process (RUSAGE_CHILDREN of a parent that runs nothing
else), not by the test process itself: Linux starts a child's high-water mark at its parent's
size at fork, so measuring from a large test process would report the test's size instead."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PEAK_MARK = "__modelplane_peak_kib__"
LAUNCHER = f"""
import resource, subprocess, sys
code = subprocess.call(sys.argv[1:])
sys.stderr.write("\\n{PEAK_MARK} %d\\n" % resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
sys.exit(code)
"""


@dataclass(frozen=True)
class Run:
    code: int
    stdout: str
    stderr: str
    seconds: float
    peak_mb: float


def run_modelplane(*args: str, timeout: float = 120.0) -> Run:
    return run_python("-m", "modelplane", *args, timeout=timeout)


def run_python(*args: str, timeout: float = 300.0) -> Run:
    """`python ARGS...` (`-m modelplane ...`, or a script and its arguments), measured."""
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-S", "-c", LAUNCHER, sys.executable, *args],
                          cwd=REPO, stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    seconds = time.monotonic() - start
    err = proc.stderr.decode(errors="replace")
    head, _, tail = err.rpartition(f"\n{PEAK_MARK} ")
    peak_kib = int(tail.strip() or 0) if head or tail else 0
    return Run(proc.returncode, proc.stdout.decode(errors="replace"), head.rstrip("\n") if head else "",
               seconds, peak_kib / 1024)
