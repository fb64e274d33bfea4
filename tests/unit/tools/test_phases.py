"""scripts/phases: CI's phase table and its pytest budget (.ci/run), run for real."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
PHASES = REPO / "scripts" / "phases"


def _default_sigint() -> None:
    # A run started in the background by a non-interactive shell inherits SIGINT ignored; phases
    # is started as a terminal would start it, so what the test sees is phases' own doing.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def phases(rows: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(PHASES), *args], env={**os.environ, "MODELPLANE_PHASES": str(rows)},
                          capture_output=True, text=True, timeout=timeout, preexec_fn=_default_sigint)


def test_run_records_the_wall_time_and_passes_the_exit_status_on(tmp_path: Path) -> None:
    rows = tmp_path / "rows"
    assert phases(rows, "run", "lint", "--", sys.executable, "-c", "pass").returncode == 0
    assert phases(rows, "run", "broken", "--", sys.executable, "-c", "raise SystemExit(7)").returncode == 7
    got = [json.loads(line) for line in rows.read_text().splitlines()]
    assert [(r["phase"], r["rc"]) for r in got] == [("lint", 0), ("broken", 7)]
    assert all(r["seconds"] >= 0 for r in got)


def test_report_fails_loudly_naming_the_phase_over_its_budget(tmp_path: Path) -> None:
    rows = tmp_path / "rows"
    rows.write_text(json.dumps({"phase": "pytest", "seconds": 2500.0, "rc": 0}) + "\n"
                    + json.dumps({"phase": "pytest: tests/sim", "seconds": 2000.0, "busy_s": 1900, "tests": 90}) + "\n")
    over = phases(rows, "report", "--budget-s", "2400")
    assert over.returncode == 3
    assert "BUDGET EXCEEDED: phase `pytest` took 2500 s, over its budget of 2400 s" in over.stderr
    assert "pytest: tests/sim" in over.stdout and "1900 s of tests, 90 tests" in over.stdout
    within = phases(rows, "report", "--budget-s", "3000")
    assert within.returncode == 0, within.stderr
    assert "budget: `pytest` took 2500 s of its 3000 s" in within.stdout


def test_report_without_the_budgeted_phase_fails_instead_of_passing(tmp_path: Path) -> None:
    rows = tmp_path / "rows"
    rows.write_text(json.dumps({"phase": "lint: ruff", "seconds": 1.0}) + "\n")
    run = phases(rows, "report", "--budget-s", "2400")
    assert run.returncode == 3
    assert "no `pytest` phase was recorded" in run.stderr


@pytest.mark.parametrize("line", ["not json", "[1, 2]", '{"phase": "pytest", "seconds": NaN}',
                                  '{"phase": "pytest", "seconds": Infinity}', '{"phase": 3, "seconds": 1}',
                                  '{"phase": "pytest", "seconds": "9999"}', '{"phase": "pytest"}'])
def test_a_row_that_is_not_one_is_named_and_never_counted(tmp_path: Path, line: str) -> None:
    rows = tmp_path / "rows"
    rows.write_text(line + "\n" + json.dumps({"phase": "pytest", "seconds": 10.0}) + "\n")
    run = phases(rows, "report", "--budget-s", "100")
    assert run.returncode == 0, run.stderr
    assert f"phases: {rows} line 1:" in run.stderr
    assert "took 10 s of its 100 s" in run.stdout


def test_a_huge_rows_file_is_read_no_further_than_its_limit(tmp_path: Path) -> None:
    rows = tmp_path / "rows"
    row = json.dumps({"phase": "pytest", "seconds": 10.0}) + "\n"
    with rows.open("w") as f:
        f.write(row)
        f.write("x" * (64 << 20))
    run = phases(rows, "report", "--budget-s", "100")
    assert run.returncode == 0, run.stderr
    assert "took 10 s" in run.stdout


@pytest.mark.parametrize("value", ["nan", "inf", "-5", "0", "abc"])
def test_a_budget_that_is_not_a_positive_number_is_refused(tmp_path: Path, value: str) -> None:
    run = phases(tmp_path / "rows", "report", "--budget-s", value)
    assert run.returncode == 2
    assert "--budget-s must be a" in run.stderr
    assert "Traceback" not in run.stderr


def test_a_symlinked_rows_file_is_not_written_through_and_the_command_still_runs(tmp_path: Path) -> None:
    target = tmp_path / "precious"
    target.write_text("keep\n")
    rows = tmp_path / "rows"
    rows.symlink_to(target)
    run = phases(rows, "run", "x", "--", sys.executable, "-c", "pass")
    assert run.returncode == 0
    assert "must name a regular file (not a symbolic link)" in run.stderr
    assert target.read_text() == "keep\n"


def test_memory_records_the_peak_pss_of_the_whole_process_tree(tmp_path: Path) -> None:
    """A grandchild in its own session holding ~200 MiB counts: sim control planes are those."""
    rows = tmp_path / "rows"
    grandchild = ("import subprocess, sys; subprocess.run([sys.executable, '-c', "
                  "'import time; b = bytearray(200 << 20); b[::4096] = b\"x\" * len(b[::4096]); time.sleep(4)'], "
                  "start_new_session=True)")
    run = phases(rows, "memory", "--", sys.executable, "-c", grandchild)
    assert run.returncode == 0, run.stderr
    peaks = {row["phase"]: row for row in map(json.loads, rows.read_text().splitlines())}
    assert set(peaks) == {"peak PSS", "peak anonymous PSS"}
    assert peaks["peak PSS"]["pss_mib"] >= 200, peaks
    # the bytearray is anonymous memory: it counts in both peaks
    assert peaks["peak anonymous PSS"]["pss_mib"] >= 200, peaks


def test_a_peak_names_what_each_xdist_worker_ran_and_no_other_command_line(tmp_path: Path) -> None:
    """The sim tests' peak is a fleet plus the workers' own heaps (docs/ci.md): the row says
    which test each worker ran then, from its title (setproctitle, as xdist sets it). Another
    process's command line may hold a secret: it is never read."""
    pytest.importorskip("setproctitle")
    rows = tmp_path / "rows"
    worker = ("import setproctitle, time; setproctitle.setproctitle('[pytest-xdist running] tests/x.py::test_y'); "
              "b = bytearray(120 << 20); b[::4096] = b'x' * len(b[::4096]); time.sleep(4)")
    other = "import time; time.sleep(4)"
    both = (f"import subprocess, sys; a = subprocess.Popen([sys.executable, '-c', {worker!r}]); "
            f"b = subprocess.Popen([sys.executable, '-c', {other!r}, 'token=hunter2']); a.wait(); b.wait()")
    run = phases(rows, "memory", "--", sys.executable, "-c", both)
    assert run.returncode == 0, run.stderr
    peaks = {row["phase"]: row for row in map(json.loads, rows.read_text().splitlines())}
    [(title, pss, anon)] = peaks["peak anonymous PSS"]["workers"]
    assert title == "[pytest-xdist running] tests/x.py::test_y" and anon >= 120 and pss >= anon
    assert "hunter2" not in rows.read_text()
    report = phases(rows, "report")
    assert "[pytest-xdist running] tests/x.py::test_y: " in report.stdout, report.stdout


def test_a_mapped_file_counts_in_the_pss_peak_but_not_in_the_anonymous_one(tmp_path: Path) -> None:
    """What the Go linker does with its inputs and output (3.3 of its 3.9 GiB when it links the
    Kubernetes provider): file pages the kernel can drop under pressure, reported apart."""
    rows = tmp_path / "rows"
    data = tmp_path / "data"
    data.write_bytes(b"x" * (200 << 20))
    holder = ("import mmap, sys, time; f = open(sys.argv[1], 'rb'); "
              "m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ); "
              "sum(m[i] for i in range(0, len(m), 4096)); time.sleep(4)")
    run = phases(rows, "memory", "--", sys.executable, "-c", holder, str(data))
    assert run.returncode == 0, run.stderr
    peaks = {row["phase"]: row for row in map(json.loads, rows.read_text().splitlines())}
    assert peaks["peak PSS"]["pss_mib"] >= 200, peaks
    assert peaks["peak anonymous PSS"]["pss_mib"] < 100, peaks


def test_a_stopping_signal_is_passed_on_and_the_command_waited_for(tmp_path: Path) -> None:
    rows, started = tmp_path / "rows", tmp_path / "started"
    child = ("import signal, sys, time, pathlib\n"
             "signal.signal(signal.SIGTERM, lambda *a: (pathlib.Path(sys.argv[1]).write_text('term'), sys.exit(5)))\n"
             "pathlib.Path(sys.argv[1]).write_text('up')\n"
             "time.sleep(600)\n")
    run = subprocess.Popen([sys.executable, str(PHASES), "run", "pytest", "--", sys.executable, "-c", child,
                            str(started)], env={**os.environ, "MODELPLANE_PHASES": str(rows)})
    try:
        deadline = time.monotonic() + 60
        while not started.exists() or started.read_text() != "up":
            assert time.monotonic() < deadline, "the command did not start within 60 s"
            assert run.poll() is None
            time.sleep(0.05)
        run.send_signal(signal.SIGTERM)
        assert run.wait(timeout=60) == 5
        assert started.read_text() == "term"
        assert json.loads(rows.read_text())["rc"] == 5
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()


@pytest.mark.parametrize("argv", [[], ["run"], ["run", "x"], ["run", "--", "true"], ["run", "x", "--"],
                                  ["memory", "x", "--", "true"], ["report", "--budget-s"], ["frobnicate"]])
def test_bad_usage_is_a_message_not_a_traceback(tmp_path: Path, argv: list[str]) -> None:
    run = phases(tmp_path / "rows", *argv)
    assert run.returncode == 2
    assert run.stderr.startswith("phases: ")
    assert "Traceback" not in run.stderr


def test_the_command_gets_ctrl_c_as_usual(tmp_path: Path) -> None:
    """phases itself sits out SIGINT, but the command it runs (pytest and what pytest starts) must
    not inherit an ignored SIGINT: Ctrl-C would then reach nobody."""
    check = "import signal; print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)"
    run = phases(tmp_path / "rows", "run", "x", "--", sys.executable, "-c", check)
    assert run.stdout.strip() == "True", run.stdout + run.stderr
    run = phases(tmp_path / "rows", "memory", "--", sys.executable, "-c", check)
    assert run.stdout.strip() == "True", run.stdout + run.stderr
