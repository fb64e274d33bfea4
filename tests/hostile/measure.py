"""Run `python -m modelplane ...` as a child and measure it: wall time and the child's own peak
RSS (os.wait4's rusage of that one process, not of every child ever reaped)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Run:
    code: int
    stdout: str
    stderr: str
    seconds: float
    peak_mb: float


def run_modelplane(*args: str, timeout: float = 120.0) -> Run:
    start = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "modelplane", *args], cwd=REPO, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    outputs: dict[str, bytes] = {}

    def drain(name: str, stream: object) -> None:
        outputs[name] = stream.read()  # type: ignore[attr-defined]

    readers = [threading.Thread(target=drain, args=(n, s), daemon=True)
               for n, s in (("out", proc.stdout), ("err", proc.stderr))]
    for r in readers:
        r.start()
    killer = threading.Timer(timeout, proc.kill)
    killer.start()
    try:
        _, status, usage = os.wait4(proc.pid, 0)
    finally:
        killer.cancel()
    proc.returncode = os.waitstatus_to_exitcode(status)
    for r in readers:
        r.join(10)
    seconds = time.monotonic() - start
    return Run(proc.returncode, outputs.get("out", b"").decode(errors="replace"),
               outputs.get("err", b"").decode(errors="replace"), seconds, usage.ru_maxrss / 1024)
