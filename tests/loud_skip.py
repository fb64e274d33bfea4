"""Loud skips for tests that need tools built outside the repository (the real Pulumi engine,
the simulated clusters): a skip says why, is repeated in red in the terminal summary, and
MODELPLANE_REQUIRE_ENGINE=1 turns it into a failure, so a missing tool never passes silently."""

from __future__ import annotations

import os
from typing import Any, NoReturn

import pytest


class LoudSkips:
    def __init__(self, prefix: str, banner: str, hint: str) -> None:
        self.prefix = prefix
        self.banner = banner
        self.hint = hint
        self.reasons: list[str] = []

    def skip(self, reason: str) -> NoReturn:
        reason = f"{self.prefix}: {reason}"
        if os.environ.get("MODELPLANE_REQUIRE_ENGINE"):
            pytest.fail(reason + " (MODELPLANE_REQUIRE_ENGINE is set)", pytrace=False)
        if reason not in self.reasons:
            self.reasons.append(reason)
        pytest.skip(reason)

    def summary(self, terminalreporter: Any) -> None:
        if self.reasons:
            terminalreporter.write_sep("!", self.banner, red=True, bold=True)
            for reason in self.reasons:
                terminalreporter.write_line(reason, red=True)
            terminalreporter.write_line(self.hint, red=True)
