"""The Kubernetes CEL libraries a DRA selector may call (``quantity``, ``semver``, ``matches``
with RE2) on top of celpy's standard functions, each charging cel-go's runtime cost before
it runs (modelplane.cel.cost)."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any, Generic, TypeAlias, TypeVar

import celpy.celtypes as ct
import re2
from celpy.evaluation import base_functions

from modelplane.quantity import Quantity, QuantityError
from modelplane.semver import Semver, SemverError

from .cost import CALL_COST, MACROS, REGEX_FACTOR, STRING_FACTOR, charge, runtime_size

# --- CEL values for the Kubernetes libraries --------------------------------------------

# A value a selector computes: one of celpy's types, one of ours (CelQuantity, CelSemver), or
# a CELEvalError carried to the caller. It is dynamic: celpy's unions (`celtypes.Value`,
# `evaluation.Result`) leave our two types out, and its interpreter's methods are seen as
# untyped (celpy's `@trace` decorator erases their annotations).
CelValue: TypeAlias = Any
# A function a selector can call: celpy passes whatever the selector computed.
CelFunction: TypeAlias = Callable[..., CelValue]

_Value = TypeVar("_Value")


class _Wrapped(Generic[_Value]):
    """Equality but deliberately no ordering: Kubernetes has no `<` on these types."""

    __slots__ = ("value",)

    def __init__(self, value: _Value) -> None:
        self.value = value

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return bool(self.value == other.value)

    def __ne__(self, other: object) -> bool:
        result = self.__eq__(other)
        return result if result is NotImplemented else not result

    def __hash__(self) -> int:
        return hash(self.value)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.value)!r})"


class CelQuantity(_Wrapped[Quantity]):
    pass


class CelSemver(_Wrapped[Semver]):
    pass


def _no_overload(name: str, *args: object) -> TypeError:
    kinds = ", ".join(type(a).__name__ for a in args)
    return TypeError(f"no such overload: {name}({kinds})")


def _string(name: str, value: object) -> str:
    if not isinstance(value, str):
        raise _no_overload(name, value)
    return str(value)


def _quantity_arg(name: str, value: object) -> Quantity:
    if not isinstance(value, CelQuantity):
        raise _no_overload(name, value)
    quantity: Quantity = value.value
    return quantity


def _normalize_arg(name: str, normalize: object) -> bool:
    if not isinstance(normalize, ct.BoolType):
        raise _no_overload(name, normalize)
    return bool(normalize)


_TRUE, _FALSE = ct.BoolType(True), ct.BoolType(False)  # noqa: FBT003 - CEL's booleans

# Selectors re-parse the same literals on every evaluation; results are immutable.
_parse_quantity = functools.lru_cache(maxsize=4096)(Quantity.parse)


def _cel_quantity(text: object) -> CelQuantity:
    return CelQuantity(_parse_quantity(_string("quantity", text)))


def _is_quantity(text: object) -> ct.BoolType:
    try:
        Quantity.parse(_string("isQuantity", text))
    except QuantityError:
        return _FALSE
    return _TRUE


def _cel_semver(text: object, normalize: object = _FALSE) -> CelSemver:
    return CelSemver(Semver.parse(_string("semver", text), normalize=_normalize_arg("semver", normalize)))


def _is_semver(text: object, normalize: object = _FALSE) -> ct.BoolType:
    try:
        Semver.parse(_string("isSemver", text), normalize=_normalize_arg("isSemver", normalize))
    except SemverError:
        return _FALSE
    return _TRUE


def _compare(name: str, left: object, right: object) -> int:
    if isinstance(left, CelQuantity) and isinstance(right, CelQuantity):
        return int(left.value.compare_to(right.value))
    if isinstance(left, CelSemver) and isinstance(right, CelSemver):
        return int(left.value.compare_to(right.value))
    raise _no_overload(name, left, right)


def _arith(name: str, op: Callable[[Quantity, Quantity | int], Quantity]) -> Callable[[object, object], CelQuantity]:
    def apply(left: object, right: object) -> CelQuantity:
        if isinstance(right, CelQuantity):
            right = right.value
        elif isinstance(right, ct.IntType) and not isinstance(right, ct.BoolType):
            right = int(right)
        else:
            raise _no_overload(name, left, right)
        return CelQuantity(op(_quantity_arg(name, left), right))
    return apply


def _semver_part(name: str) -> Callable[[object], ct.IntType]:
    def part(version: object) -> ct.IntType:
        if not isinstance(version, CelSemver):
            raise _no_overload(name, version)
        return ct.IntType(getattr(version.value, name))
    return part


# Each is callable as `f(x, ...)` and as `x.f(...)`: celpy passes the receiver first.
EXTENSIONS: dict[str, CelFunction] = {
    "quantity": _cel_quantity,
    "isQuantity": _is_quantity,
    "semver": _cel_semver,
    "isSemver": _is_semver,
    "compareTo": lambda a, b: ct.IntType(_compare("compareTo", a, b)),
    "isGreaterThan": lambda a, b: ct.BoolType(_compare("isGreaterThan", a, b) > 0),
    "isLessThan": lambda a, b: ct.BoolType(_compare("isLessThan", a, b) < 0),
    "sign": lambda q: ct.IntType(_quantity_arg("sign", q).sign()),
    "isInteger": lambda q: ct.BoolType(_quantity_arg("isInteger", q).is_integer()),
    "asInteger": lambda q: ct.IntType(_quantity_arg("asInteger", q).as_integer()),
    "asApproximateFloat": lambda q: ct.DoubleType(_quantity_arg("asApproximateFloat", q).as_approximate_float()),
    "add": _arith("add", Quantity.add),
    "sub": _arith("sub", Quantity.sub),
    "major": _semver_part("major"),
    "minor": _semver_part("minor"),
    "patch": _semver_part("patch"),
}
# Total argument count (receiver included) accepted by each extension.
ARITY: dict[str, tuple[int, int]] = {
    "quantity": (1, 1), "isQuantity": (1, 1), "semver": (1, 2), "isSemver": (1, 2),
    "compareTo": (2, 2), "isGreaterThan": (2, 2), "isLessThan": (2, 2), "add": (2, 2), "sub": (2, 2),
    "sign": (1, 1), "isInteger": (1, 1), "asInteger": (1, 1), "asApproximateFloat": (1, 1),
    "major": (1, 1), "minor": (1, 1), "patch": (1, 1),
}
COMPREHENSIONS = MACROS
# celpy's own non-standard `reduce`/`min` macros are left out: Kubernetes would reject them.
BUILTINS = {name for name in base_functions if name[0].isalpha()}
VARIABLES = {"device"}


# --- runtime cost of functions ----------------------------------------------------------

_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False   # re2 would print parse errors on stderr itself


@functools.lru_cache(maxsize=1024)
def regex(pattern: str) -> re2._Regexp:
    """RE2, as cel-go: linear time whatever the pattern (no catastrophic backtracking).
    (google-re2 ships no type information, so mypy cannot check this name.)"""
    return re2.compile(pattern, _RE2_OPTIONS)


def _matches(text: object, pattern: object) -> ct.BoolType:
    if not isinstance(text, str) or not isinstance(pattern, str):
        raise _no_overload("matches", text, pattern)
    try:
        compiled = regex(str(pattern))
    except re2.error as error:
        raise ValueError(f"invalid regular expression: {error.args[0]!r}") from None
    return ct.BoolType(compiled.search(str(text)) is not None)


def _sized(value: object) -> bool:
    return isinstance(value, (str, bytes, list, tuple, dict))


def _call_cost(name: str, args: tuple[object, ...]) -> int:
    """cel-go's runtime cost of one call, from the actual argument sizes."""
    if name == "_+_" and len(args) == 2 and _sized(args[0]) and _sized(args[1]):
        # charged before the concatenation runs: a doubling chain stops at the budget
        return max(1, math.ceil((runtime_size(args[0]) + runtime_size(args[1])) * STRING_FACTOR))
    if name in _COMPARISON_FUNCTIONS and len(args) == 2 and _sized(args[0]) and _sized(args[1]):
        return max(1, math.ceil(min(runtime_size(args[0]), runtime_size(args[1])) * STRING_FACTOR))
    if name == "_in_" and len(args) == 2 and isinstance(args[1], (list, tuple)):
        return max(1, len(args[1]))
    if name in ("startsWith", "endsWith") and len(args) == 2:
        return max(1, math.ceil(runtime_size(args[1]) * STRING_FACTOR))
    if name == "contains" and len(args) == 2 and isinstance(args[0], str):
        return max(1, math.ceil(len(args[0]) * STRING_FACTOR) * math.ceil(runtime_size(args[1]) * STRING_FACTOR))
    if name == "matches" and len(args) == 2:
        return max(1, math.ceil((runtime_size(args[0]) + 1) * STRING_FACTOR)
                   * math.ceil(runtime_size(args[1]) * REGEX_FACTOR))
    if name in ("quantity", "isQuantity", "semver", "isSemver") and args:
        return CALL_COST + math.ceil(runtime_size(args[0]) * STRING_FACTOR)
    return 0 if name in _FREE_FUNCTIONS else CALL_COST


_COMPARISON_FUNCTIONS = {"_==_", "_!=_", "_<_", "_<=_", "_>_", "_>=_"}
# The logical operators cost nothing themselves in cel-go (their operands do).
_FREE_FUNCTIONS = {"_&&_", "_||_", "_?_:_"}


def _charged(name: str, function: CelFunction) -> CelFunction:
    def call(*args: object) -> CelValue:
        charge(_call_cost(name, args))
        return function(*args)
    call.__name__ = getattr(function, "__name__", name)
    return call


# Every function a selector can call, each charging its cost before it runs.
def _all_functions() -> dict[str, CelFunction]:
    functions: dict[str, CelFunction] = dict(base_functions)
    functions.update(EXTENSIONS)
    functions["matches"] = _matches
    return {name: _charged(name, function) for name, function in functions.items()}


FUNCTIONS = _all_functions()
