"""Every test run: SIGTERM and SIGHUP tear fixtures down as Ctrl-C does (tests/signals.py)."""

from tests.signals import pytest_configure as pytest_configure
