"""Durations, the one rule for every time a command, the stack config or a state file gives:
a finite number of seconds, above zero (or zero where "at once" means something), and within a
bound that keeps every deadline computable (`inf`, `nan`, `1e999`, `-1` and
`10000000000000h` are refused where they enter, naming the option and the bound).

    parse_duration("2m", "--interval", maximum=MAX_INTERVAL_S)   # 120.0
    seconds(cfg["timeoutSeconds"], "observe.timeoutSeconds", maximum=MAX_READ_TIMEOUT_S)
    p.add_argument("--timeout", type=duration_arg("--timeout", MAX_READ_TIMEOUT_S))
"""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Callable

# Bounds: generous over any real use, small enough that `now + bound` is an ordinary float.
MAX_READ_TIMEOUT_S = 600.0                # one cluster read (plan --observe-timeout, verify --timeout)
MAX_WAIT_S = 24 * 3600.0                  # verify --wait, verifyWaitSeconds
MAX_INTERVAL_S = 7 * 24 * 3600.0          # reconcile --interval
MAX_GRACE_S = 30 * 24 * 3600.0            # unreachable / unready grace periods
MAX_START_TIMEOUT_S = 3600.0              # sim --timeout (one start-up phase)

_TEXT = re.compile(r"^\s*(\d{1,15}(?:\.\d{1,9})?)\s*(ms|s|m|h)?\s*$")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}


class DurationError(ValueError):
    """A duration that is not a finite number of seconds within its bound."""


def _bounded(value: float, what: str, maximum: float, *, allow_zero: bool, given: str) -> float:
    low = "0 or more" if allow_zero else "more than 0"
    if not math.isfinite(value) or value < 0 or (value == 0 and not allow_zero) or value > maximum:
        raise DurationError(f"{what} {given}: expected a number of seconds, {low} and at most {maximum:g}")
    return value


def seconds(value: object, what: str, *, maximum: float, allow_zero: bool = False) -> float:
    """A number of seconds given as a number (stack config, a JSON field): int or float, never a
    bool or a string; DurationError naming `what` otherwise."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise DurationError(f"{what}: expected a number of seconds, got {type(value).__name__}")
    try:
        number = float(value)
    except OverflowError:                     # an int past float's range
        number = math.inf
    return _bounded(number, what, maximum, allow_zero=allow_zero, given=f"{number:g}")


def parse_duration(text: str, what: str, *, maximum: float, allow_zero: bool = False) -> float:
    """`60s`, `2m`, `1h`, `500ms` or plain seconds (`5`, `0.5`) -> seconds."""
    match = _TEXT.match(text)
    if not match:
        raise DurationError(f"{what} {text[:40]!r}: expected a duration such as 5, 0.5, 500ms, 60s, 2m or 1h")
    value = float(match.group(1)) * _UNITS[match.group(2)]
    return _bounded(value, what, maximum, allow_zero=allow_zero, given=repr(text.strip()[:40]))


def duration_arg(what: str, maximum: float, *, allow_zero: bool = False) -> Callable[[str], float]:
    """An argparse `type=` for a duration option: a bad value is argparse's own error (exit 2)."""
    def convert(text: str) -> float:
        try:
            return parse_duration(text, what, maximum=maximum, allow_zero=allow_zero)
        except DurationError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    return convert
