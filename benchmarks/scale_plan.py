"""`plan` at scale: end to end in fresh processes, against a fresh
process that only parses the same YAML with libyaml, and where the time goes inside.

Run through benchmarks/scale.py. Each figure is the best of `repeat` runs (the machine
is shared; the best run is the one least disturbed), measured in this run.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# A fresh interpreter that reads and parses every manifest file with libyaml's C loader,
# nothing else: the floor a YAML-reading command cannot go below.
PARSE_ONLY = """
import sys, yaml
from pathlib import Path
root = Path(sys.argv[1])
for path in sorted(p for p in root.rglob("*") if p.suffix in (".yaml", ".yml")):
    list(yaml.load_all(path.read_bytes(), Loader=yaml.CSafeLoader))
"""

# Where the time of one `plan` goes, in one fresh interpreter, phase by phase. "load" is
# reading and parsing as the loader does it: load_manifests minus validation, which is
# timed on its own over the same documents (load_documents).
PHASES = """
import json, sys, time
t0 = time.perf_counter()
from modelplane.__main__ import build_parser
from modelplane.api import load_documents, load_manifests
from modelplane.scheduler import place_fleet
from modelplane.scheduler.placement_report import format_table
t1 = time.perf_counter()
fleet = load_manifests(sys.argv[1])
t2 = time.perf_counter()
docs = fleet.to_documents()
t3 = time.perf_counter()
load_documents(docs)
t4 = time.perf_counter()
placement = place_fleet(fleet)
t5 = time.perf_counter()
table = format_table(placement)
t6 = time.perf_counter()
text = json.dumps(placement.to_json())
t7 = time.perf_counter()
print(json.dumps({"import": t1 - t0, "load (read + parse)": (t2 - t1) - (t4 - t3), "validate": t4 - t3,
                  "place": t5 - t4, "serialise: table": t6 - t5, "serialise: json": t7 - t6}))
"""


@dataclass
class Timed:
    seconds: float
    peak_rss: int       # bytes (ru_maxrss of the process)


def timed_process(argv: list[str], stdout: Path) -> Timed:
    """Wall time from spawn to exit, output to a file, and the process's peak RSS."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    with stdout.open("wb") as out:
        start = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.PIPE, cwd=REPO, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - start
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    if proc.stderr:
        proc.stderr.close()
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {proc.returncode}: {err[-2000:]}")
    return Timed(seconds, usage.ru_maxrss * 1024)


def best(argv: list[str], stdout: Path, repeat: int) -> Timed:
    runs = [timed_process(argv, stdout) for _ in range(repeat)]
    return Timed(min(r.seconds for r in runs), max(r.peak_rss for r in runs))


def measure_plan(fleet_dir: Path, work: Path, repeat: int) -> dict[str, Timed]:
    py = sys.executable
    return {
        "libyaml parse only": best([py, "-c", PARSE_ONLY, str(fleet_dir)], work / "parse.out", repeat),
        "plan": best([py, "-m", "modelplane", "plan", str(fleet_dir)], work / "plan.out", repeat),
        "plan --json": best([py, "-m", "modelplane", "plan", "--json", str(fleet_dir)], work / "plan.json", repeat),
    }


def measure_phases(fleet_dir: Path, repeat: int) -> dict[str, float]:
    """Per phase, the best of `repeat` fresh interpreters."""
    import json

    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out: dict[str, float] = {}
    for _ in range(repeat):
        run = subprocess.run([sys.executable, "-c", PHASES, str(fleet_dir)], cwd=REPO, env=env,
                             capture_output=True, text=True, check=True)
        for phase, seconds in json.loads(run.stdout.strip().splitlines()[-1]).items():
            out[phase] = min(seconds, out.get(phase, seconds))
    return out
