"""`make test` under pytest-xdist (tests/parallel.py, tests/loud_skip.py): a real `pytest -n 2
--dist loadgroup` run of a small suite laid out like the repository's."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

CONFTEST = '''
pytest_plugins = ["tests.parallel", "tests.loud_skip"]
'''
# The repository's own loud skips (tests/sim/conftest.py's), raised in the workers.
SIM_CONFTEST = '''
import pytest
from tests.sim.conftest import SKIPS

@pytest.fixture
def tool():
    SKIPS.skip("no such tool")
'''
MODULE = '''
import pytest

@pytest.mark.parametrize("n", range(4))
def test_one(n):
    pass

def test_needs_the_tool(tool):
    pass
'''


def _suite(root: Path) -> None:
    (root / "conftest.py").write_text(CONFTEST)
    for d in ("tests/sim", "tests/engine", "tests/unit"):
        (root / d).mkdir(parents=True)
    (root / "tests/sim/conftest.py").write_text(SIM_CONFTEST)
    (root / "tests/engine/conftest.py").write_text(SIM_CONFTEST)
    for module in ("tests/sim/test_a.py", "tests/sim/test_stack.py", "tests/engine/test_e.py",
                   "tests/engine/test_f.py", "tests/unit/test_u.py"):
        (root / module).write_text(MODULE if "/unit/" not in module else MODULE.split("def test_needs")[0])


def _pytest(root: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k != "MODELPLANE_REQUIRE_ENGINE"}
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--rootdir", str(root), *args],
                          cwd=root, env={**base, "PYTHONPATH": str(REPO), **(env or {})}, capture_output=True,
                          text=True, timeout=240)


def test_the_slowest_module_is_collected_first_and_the_rest_keep_their_order(tmp_path: Path) -> None:
    _suite(tmp_path)
    run = _pytest(tmp_path, "--collect-only", "-q")
    modules = list(dict.fromkeys(line.split("::")[0] for line in run.stdout.splitlines() if "::" in line))
    assert modules == ["tests/sim/test_stack.py", "tests/engine/test_e.py", "tests/engine/test_f.py",
                       "tests/sim/test_a.py", "tests/unit/test_u.py"], run.stdout


def test_one_xdist_run_groups_each_module_prints_the_loud_skips_once_and_writes_a_row_per_directory(
        tmp_path: Path) -> None:
    """One real `pytest -n 2 --dist loadgroup -v` of the small suite, with tests/phases.py on, read
    three ways (each was a run of its own, ~40 s apiece on a loaded 2-core machine):
    * every module runs on one worker, and every sim module on the same one;
    * the skips happen in the workers, the red summary is the controller's, one line per reason;
    * the workers write no phase row, the controller one per test directory."""
    _suite(tmp_path)
    (tmp_path / "conftest.py").write_text('pytest_plugins = ["tests.parallel", "tests.loud_skip", "tests.phases"]\n')
    rows = tmp_path / "rows"
    run = _pytest(tmp_path, "-n", "2", "--dist", "loadgroup", "-v", env={"MODELPLANE_PHASES": str(rows)})
    out = run.stdout + run.stderr
    assert run.returncode == 0, out

    workers: dict[str, set[str]] = {}
    for worker, module in re.findall(r"\[(gw\d)\] \[\s*\d+%\] \w+ (tests/\w+/test_\w+\.py)", out):
        workers.setdefault(module, set()).add(worker)
    assert set(workers) == {"tests/sim/test_a.py", "tests/sim/test_stack.py", "tests/engine/test_e.py",
                            "tests/engine/test_f.py", "tests/unit/test_u.py"}, out
    grouped = {m: w for m, w in workers.items() if not m.startswith("tests/unit/")}
    assert all(len(w) == 1 for w in grouped.values()), grouped
    assert workers["tests/sim/test_a.py"] == workers["tests/sim/test_stack.py"], workers

    assert run.stdout.count("tests/sim SKIPPED: no real control plane was exercised") == 1, run.stdout
    assert run.stdout.count("\nSIMULATED CLUSTERS NOT AVAILABLE, sim test NOT RUN: no such tool\n") == 1, run.stdout
    assert "4 skipped" in run.stdout, run.stdout

    got = {r["phase"]: r for r in map(json.loads, rows.read_text().splitlines())}
    assert set(got) == {"pytest: tests/sim", "pytest: tests/engine", "pytest: tests/unit"}, got
    assert got["pytest: tests/sim"]["tests"] == 10 and got["pytest: tests/unit"]["tests"] == 4, got
    assert all(r["seconds"] >= 0 and r["busy_s"] >= 0 for r in got.values())


# A worker that finishes early (one quick test) and one that runs on until the first one's process
# is gone, or fails after WAIT_S: the heap of a worker with nothing left to do is freed while the
# other still runs (tests/parallel.py, pytest_testnodedown), not at the end of the run.
QUICK = '''
import os
from pathlib import Path

def test_quick():
    Path(os.environ["PIDS"], "quick").write_text(str(os.getpid()))
'''
SLOW = '''
import os, time
from pathlib import Path

from tests.signals import _alive   # a zombie counts as gone: its parent reaps it later

WAIT_S = 60

def gone(pid):
    return not _alive(pid)

def test_slow():
    pid_file = Path(os.environ["PIDS"], "quick")
    deadline = time.monotonic() + WAIT_S
    while not pid_file.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    quick = int(pid_file.read_text())
    assert quick != os.getpid()
    while not gone(quick) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert gone(quick), f"the worker done with its tests (pid {quick}) still runs"
'''


def test_a_worker_with_no_work_left_exits_while_another_still_runs(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "tests/engine").mkdir(parents=True)
    (tmp_path / "tests/unit").mkdir(parents=True)
    (tmp_path / "tests/engine/test_slow.py").write_text(SLOW)
    (tmp_path / "tests/unit/test_quick.py").write_text(QUICK)
    (tmp_path / "pids").mkdir()
    run = _pytest(tmp_path, "-n", "2", "--dist", "loadgroup", "-v", env={"PIDS": str(tmp_path / "pids")})
    assert run.returncode == 0, run.stdout + run.stderr
    assert "2 passed" in run.stdout, run.stdout
