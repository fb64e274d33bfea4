"""The one error the simulated clusters raise: a message a person can act on, never a traceback."""

from __future__ import annotations


class SimError(Exception):
    """Starting, reaching or stopping the simulated clusters failed; the message says what to do.
    Whoever raises it has already stopped every process it started."""
