"""SIGTERM and SIGHUP stop a test run the way Ctrl-C does. pytest's default for them is to
die at once, skipping every fixture's teardown; the sim fixtures start control planes in
their own sessions (so a Ctrl-C at the terminal reaches only pytest), which then outlive the
run with nothing to stop them. As a KeyboardInterrupt, pytest tears every fixture down
before it exits (tests/conftest.py installs this; tests/unit/test_signals.py checks it)."""

from __future__ import annotations

import signal
from types import FrameType

import pytest

STOPPING_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


def _interrupt(signum: int, _frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"{signal.Signals(signum).name}: stopping the test run")


def pytest_configure(config: pytest.Config) -> None:
    for sig in STOPPING_SIGNALS:
        signal.signal(sig, _interrupt)
