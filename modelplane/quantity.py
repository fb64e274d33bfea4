"""Kubernetes ``resource.Quantity`` semantics, computed exactly.

Values are stored as an integer count of nano-units: Kubernetes rounds every
quantity up (away from zero) to nano precision, so that representation is exact
and comparisons never touch floating point.
"""

from __future__ import annotations

import functools
import re
from fractions import Fraction

NANO = 10**9
INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1

BINARY_SUFFIXES = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
DECIMAL_SUFFIXES = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}

BINARY_SI = "BinarySI"
DECIMAL_SI = "DecimalSI"
DECIMAL_EXPONENT = "DecimalExponent"

# [0-9] rather than \d: Python's \d also accepts non-ASCII digits, Kubernetes does not.
_NUMBER = re.compile(r"([+-]?)([0-9]+)(?:\.([0-9]*))?|([+-]?)\.([0-9]+)")
_EXPONENT = re.compile(r"[eE]([+-]?[0-9]+)")
# Bound the work (and the size of the integer) an adversarial quantity can cause; real
# quantities never get close. Kubernetes has no such bound, but a value past them could not
# even be printed here (Python refuses int<->str past 4,300 digits).
MAX_EXPONENT = 1_000
MAX_DIGITS = 100
_EXAMPLES = 'e.g. "80Gi", "1.5", "500m", "1e3"'


class QuantityError(ValueError):
    """A string that is not a valid Kubernetes quantity."""


def _fail(text: object, problem: str) -> QuantityError:
    return QuantityError(f"invalid quantity {text!r}: {problem} ({_EXAMPLES})")


def _split(text: str) -> tuple[int, str, str, str]:
    """Returns (sign, integer digits, fraction digits, suffix text)."""
    match = _NUMBER.match(text)
    if match is None:
        if text.strip() != text:
            raise _fail(text, "leading or trailing whitespace is not allowed")
        raise _fail(text, "must start with a number, optionally signed")
    if match.group(2) is not None:
        sign, whole, frac = match.group(1), match.group(2), match.group(3) or ""
    else:
        sign, whole, frac = match.group(4), "", match.group(5)
    return (-1 if sign == "-" else 1), whole, frac, text[match.end():]


def _suffix_scale(text: str, suffix: str) -> tuple[Fraction, str]:
    if suffix in BINARY_SUFFIXES:
        return Fraction(2 ** BINARY_SUFFIXES[suffix]), BINARY_SI
    if suffix in DECIMAL_SUFFIXES:
        return Fraction(10) ** DECIMAL_SUFFIXES[suffix], DECIMAL_SI
    exp = _EXPONENT.fullmatch(suffix)
    if exp is not None:
        written = exp.group(1)
        if len(written.lstrip("+-").lstrip("0")) > len(str(MAX_EXPONENT)):
            # int() of thousands of digits is itself refused (and slow): decide by length.
            if written.startswith("-"):
                return Fraction(10) ** -MAX_EXPONENT, DECIMAL_EXPONENT
            raise _fail(text[:40] + "...", "exponent is too large")
        power = int(written)
        if power > MAX_EXPONENT:
            raise _fail(text, f"exponent {power} is too large")
        # Anything nonzero below 1e-9 rounds up to 1n anyway; clamping keeps that exact.
        return Fraction(10) ** max(power, -MAX_EXPONENT), DECIMAL_EXPONENT
    if suffix == "K":
        raise _fail(text, "suffix 'K' does not exist: use 'k' (10^3) or 'Ki' (2^10)")
    if any(c.isspace() for c in suffix):
        raise _fail(text, "whitespace is not allowed")
    raise _fail(
        text,
        f"unknown suffix {suffix!r}; expected one of Ki Mi Gi Ti Pi Ei, "
        "n u m k M G T P E, or an exponent such as e3",
    )


def _ceil(value: Fraction) -> int:
    return -((-value.numerator) // value.denominator)


@functools.total_ordering
class Quantity:
    """An immutable quantity; ordering and equality ignore the notation."""

    __slots__ = ("_nanos", "_format")

    def __init__(self, nanos: int, fmt: str = DECIMAL_SI) -> None:
        self._nanos = int(nanos)
        self._format = fmt

    @classmethod
    def parse(cls, text: str) -> Quantity:
        if not isinstance(text, str):
            raise QuantityError(f"a quantity must be a string, got {type(text).__name__} ({_EXAMPLES})")
        if text == "":
            raise _fail(text, "empty string")
        sign, whole, frac, suffix = _split(text)
        if len(whole) + len(frac) > MAX_DIGITS:
            raise QuantityError(f"invalid quantity: {len(whole) + len(frac)} digits, at most {MAX_DIGITS} "
                                f"are supported ({_EXAMPLES})")
        scale, fmt = _suffix_scale(text, suffix)
        magnitude = Fraction(int(whole + frac or "0"), 10 ** len(frac)) * scale
        nanos = _ceil(magnitude * NANO)
        if fmt == BINARY_SI:
            nanos = min(nanos, INT64_MAX * NANO)
            if nanos < NANO:
                fmt = DECIMAL_SI
        return cls(sign * nanos, fmt)

    @classmethod
    def from_int(cls, value: int, fmt: str = DECIMAL_SI) -> Quantity:
        return cls(int(value) * NANO, fmt)

    @property
    def nanos(self) -> int:
        return self._nanos

    @property
    def format(self) -> str:
        return self._format

    def as_fraction(self) -> Fraction:
        return Fraction(self._nanos, NANO)

    def compare_to(self, other: Quantity) -> int:
        return (self._nanos > other._nanos) - (self._nanos < other._nanos)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Quantity):
            return NotImplemented
        return self._nanos == other._nanos

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, Quantity):
            return NotImplemented
        return self._nanos < other._nanos

    def __hash__(self) -> int:
        return hash(("Quantity", self._nanos))

    def sign(self) -> int:
        return (self._nanos > 0) - (self._nanos < 0)

    def is_integer(self) -> bool:
        return self._nanos % NANO == 0

    def as_integer(self) -> int:
        if not self.is_integer():
            raise QuantityError(f"quantity {self} is not an integer")
        value = self._nanos // NANO
        if not INT64_MIN <= value <= INT64_MAX:
            raise QuantityError(f"quantity {self} does not fit in a 64-bit integer")
        return value

    def as_approximate_float(self) -> float:
        return float(self.as_fraction())

    def _other_nanos(self, other: Quantity | int) -> int:
        if isinstance(other, Quantity):
            return other._nanos
        if isinstance(other, int) and not isinstance(other, bool):
            return other * NANO
        raise TypeError(f"cannot combine a quantity with {type(other).__name__}")

    def add(self, other: Quantity | int) -> Quantity:
        return Quantity(self._nanos + self._other_nanos(other), self._format)

    def sub(self, other: Quantity | int) -> Quantity:
        return Quantity(self._nanos - self._other_nanos(other), self._format)

    __add__ = add
    __sub__ = sub

    def __str__(self) -> str:
        nanos = self._nanos
        if nanos == 0:
            return "0"
        if self._format == BINARY_SI and nanos % NANO == 0:
            units = nanos // NANO
            for suffix, power in reversed(BINARY_SUFFIXES.items()):
                if units % (1 << power) == 0:
                    return f"{units >> power}{suffix}"
            return str(units)
        # Largest power of 1000 that divides the value keeps the mantissa an integer.
        for suffix, power in reversed(DECIMAL_SUFFIXES.items()):
            step = 10 ** (power + 9)
            if nanos % step == 0:
                mantissa = nanos // step
                if self._format == DECIMAL_EXPONENT:
                    return f"{mantissa}e{power}" if power else str(mantissa)
                return f"{mantissa}{suffix}"
        raise AssertionError("unreachable: 1n divides every value")

    def __repr__(self) -> str:
        return f"Quantity({str(self)!r})"
