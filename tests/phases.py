"""The wall span of each test directory (tests/unit, tests/sim, ...) for CI's phase table
(scripts/phases): from the first of its tests to start to the last to finish, and the sum of its
tests' own durations. Written once per run, by the process that reports (the xdist controller,
or the plain run), never by a worker, and only when $MODELPLANE_PHASES names the file."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
ENV = "MODELPLANE_PHASES"


def phases_module() -> ModuleType:
    """scripts/phases (a script without .py), the one home of the row format."""
    loader = importlib.machinery.SourceFileLoader("modelplane_phases", str(REPO / "scripts" / "phases"))
    spec = importlib.util.spec_from_loader("modelplane_phases", loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def directory_of(nodeid: str) -> str:
    """`tests/sim` of `tests/sim/test_x.py::test_y` (xdist's `@group` suffix aside)."""
    parts = nodeid.split("::", 1)[0].split("/")
    return "/".join(parts[:2]) if len(parts) > 2 else parts[0]


class Spans:
    """A plugin of the reporting process: directory -> [first start, last stop, busy s, tests]."""

    def __init__(self) -> None:
        self.spans: dict[str, list[float]] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        start, stop = getattr(report, "start", None), getattr(report, "stop", None)
        if not isinstance(start, float) or not isinstance(stop, float):
            return
        span = self.spans.setdefault(directory_of(report.nodeid), [start, stop, 0.0, 0])
        span[0], span[1] = min(span[0], start), max(span[1], stop)
        span[2] += stop - start
        if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
            span[3] += 1

    def rows(self) -> list[dict[str, Any]]:
        return [{"phase": f"pytest: {d}", "seconds": round(s[1] - s[0], 1), "busy_s": round(s[2], 1),
                 "tests": int(s[3])} for d, s in sorted(self.spans.items(), key=lambda kv: kv[1][0])]

    def pytest_sessionfinish(self) -> None:
        record = phases_module().record
        for row in self.rows():
            record(row)


def pytest_configure(config: pytest.Config) -> None:
    if os.environ.get(ENV) and not hasattr(config, "workerinput"):
        config.pluginmanager.register(Spans(), "modelplane-phases")
