"""Loud skips for tests that need tools built outside the repository (the real Pulumi engine,
the simulated clusters): a skip says why, is repeated in red in the terminal summary, and
MODELPLANE_REQUIRE_ENGINE=1 turns it into a failure, so a missing tool never passes silently.

Under pytest-xdist the skips happen in the workers, whose `reasons` the controller never sees,
and the controller, which collects nothing, never loads tests/sim/conftest.py or
tests/engine/conftest.py, whose summary hooks would print them. So every LoudSkips is kept in
REGISTRY, this module is a plugin of every run (tests/conftest.py), and its summary imports the
modules that declare them (DECLARED_IN) and prints each banner once, with the reasons read from
the skip reports the workers sent."""

from __future__ import annotations

import importlib
import os
from typing import Any, NoReturn

import pytest

# The modules that declare a LoudSkips (imported by the summary when the run did not load them).
DECLARED_IN = ("tests.engine.conftest", "tests.sim.conftest")
REGISTRY: list[LoudSkips] = []


class LoudSkips:
    def __init__(self, prefix: str, banner: str, hint: str) -> None:
        self.prefix = prefix
        self.banner = banner
        self.hint = hint
        self.reasons: list[str] = []
        REGISTRY.append(self)

    def skip(self, reason: str) -> NoReturn:
        reason = f"{self.prefix}: {reason}"
        if os.environ.get("MODELPLANE_REQUIRE_ENGINE"):
            pytest.fail(reason + " (MODELPLANE_REQUIRE_ENGINE is set)", pytrace=False)
        if reason not in self.reasons:
            self.reasons.append(reason)
        pytest.skip(reason)

    def reported(self, terminalreporter: Any) -> list[str]:
        """This run's reasons with our prefix: the ones raised here, then those in skip reports
        (an xdist worker's), each once, in order."""
        reasons = list(self.reasons)
        for report in terminalreporter.stats.get("skipped", []):
            longrepr = getattr(report, "longrepr", None)
            if isinstance(longrepr, tuple) and len(longrepr) == 3:
                message = str(longrepr[2]).removeprefix("Skipped: ")
                if message.startswith(self.prefix) and message not in reasons:
                    reasons.append(message)
        return reasons

    def summary(self, terminalreporter: Any) -> None:
        """The red banner with this run's reasons, once per run whoever calls it."""
        printed: set[str] = terminalreporter.__dict__.setdefault("_modelplane_loud_skips", set())
        reasons = self.reported(terminalreporter)
        if reasons and self.banner not in printed:
            printed.add(self.banner)
            terminalreporter.write_sep("!", self.banner, red=True, bold=True)
            for reason in reasons:
                terminalreporter.write_line(reason, red=True)
            terminalreporter.write_line(self.hint, red=True)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if terminalreporter.stats.get("skipped"):
        for module in DECLARED_IN:
            importlib.import_module(module)
    for skips in REGISTRY:
        skips.summary(terminalreporter)
