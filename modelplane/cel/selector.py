"""Compile a selector once (length, syntax, names, nesting and estimated cost checked, errors
cached too), evaluate it within Kubernetes' runtime cost limit without raising, and memoize
results per class and device."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field

import celpy
import celpy.celtypes as ct
from celpy.celparser import CELParseError
from celpy.evaluation import CELEvalError

from .cost import (
    MAX_COST,
    MAX_EXPRESSION_LENGTH,
    MAX_NESTING,
    METER,
    UNKNOWN,
    CostLimitExceeded,
    Meter,
    estimated_cost,
    nesting,
)
from .device import DeviceView
from .errors import CelError
from .evaluator import ENV
from .library import FUNCTIONS, CelValue
from .validate import check_names, syntax_error


@dataclass(frozen=True)
class CompiledSelector:
    expression: str
    _program: celpy.Runner = field(repr=False, compare=False)

    def evaluate(self, device: DeviceView) -> CelValue:
        """The raw CEL result; raises celpy errors. Most callers want `selector_matches`."""
        return self._program.evaluate({"device": device.activation})


@functools.lru_cache(maxsize=8192)
def _compile(expression: str) -> CompiledSelector | CelError:
    # Errors are cached too, so a bad selector costs one parse per process.
    if not isinstance(expression, str) or not expression.strip():
        return CelError(str(expression), "empty expression")
    if len(expression) > MAX_EXPRESSION_LENGTH:
        return CelError(expression, f"{len(expression)} characters, longer than the {MAX_EXPRESSION_LENGTH} "
                        "Kubernetes allows for a device selector (CELSelectorExpressionMaxLength)")
    try:
        ast = ENV.compile(expression)
    except CELParseError as error:
        return syntax_error(expression, error)
    depth = nesting(ast)
    if depth > MAX_NESTING:
        return CelError(expression, f"nested {depth} levels deep (parentheses, brackets, calls, field "
                        f"selections and operators); at most {MAX_NESTING} are supported: split it into "
                        "several selectors or use cel.bind")
    try:
        check_names(expression, ast)
    except CelError as error:
        return error
    cost = estimated_cost(ast)
    if cost > MAX_COST:
        shown = "unbounded" if cost >= UNKNOWN else str(cost)
        return CelError(expression, f"too complex: its estimated worst-case cost ({shown}) exceeds the limit "
                        f"{MAX_COST} Kubernetes applies to a device selector (CELSelectorExpressionMaxCost); "
                        "iterate over fewer or smaller lists, or nest fewer comprehensions")
    return CompiledSelector(expression, ENV.program(ast, functions=FUNCTIONS))


def compile_selector(expression: str) -> CompiledSelector:
    result = _compile(expression)
    if isinstance(result, CelError):
        raise result
    return result


@dataclass(frozen=True)
class SelectorResult:
    """One evaluation: `matched` only for a boolean true; `error` says how the selector
    failed (a runtime error, a non-boolean result, the cost limit), as Kubernetes reports
    "CEL runtime error" instead of a non-match; `cost` is what it spent."""

    matched: bool
    error: str | None = None
    cost: int = 0


# celpy's wording -> the words cel-go (and so Kubernetes) uses for the same runtime error.
_OPERATORS = {"addition_add": "+", "addition_sub": "-", "multiplication_mul": "*", "multiplication_div": "/",
              "multiplication_mod": "%", "relation_lt": "<", "relation_le": "<=", "relation_gt": ">",
              "relation_ge": ">=", "relation_eq": "==", "relation_ne": "!=", "relation_in": "in"}
_NO_OVERLOAD = re.compile(r"found no matching overload for (?:Token\('RULE', '(\w+)'\)|'?([\w_?:\[\]&|]+)'?) "
                          r"applied to '\((.*)\)'")
_CEL_TYPE = re.compile(r"<class 'celpy\.celtypes\.(\w+)Type'>|<class '[\w.]+\.(\w+)'>")


def _type_names(text: str) -> list[str]:
    return [(a or b).lower() for a, b in _CEL_TYPE.findall(text)]


def _describe(error: CELEvalError) -> str:
    """How a selector failed, in cel-go's words where celpy's differ."""
    message = str(error.args[0]) if error.args else "error"
    cause = error.args[2] if len(error.args) > 2 and isinstance(error.args[2], tuple) else ()
    detail = "; ".join(str(a) for a in cause if isinstance(a, str))
    found = _NO_OVERLOAD.match(message)
    if found:
        # The rule name arrives as a lark Token or, from a cached parser, a plain string.
        name = found.group(1) or found.group(2) or "?"
        op = _OPERATORS.get(name, name)
        types = _type_names(found.group(3))
        return f"no such overload: {op.join(f' {t} ' for t in types).strip() if len(types) == 2 else op}"
    if message.startswith("modulus or divide by zero"):
        return "division by zero" if "modulo" not in detail or "division" in detail else "modulus by zero"
    if message.startswith("no such member in mapping") or message.startswith("no such key"):
        key = message.partition(":")[2].strip().strip("'") or detail
        return f"no such key: {key}"
    if message == "invalid_argument" and "index out of range" in detail:
        return "index out of range"
    if message == "return error for overflow":
        return f"invalid argument: {detail}" if detail not in ("", "overflow") else "integer overflow"
    return f"{message}: {detail}" if detail and detail not in message else message


def evaluate_selector(compiled: CompiledSelector, device: DeviceView, limit: int = MAX_COST) -> SelectorResult:
    """Evaluate within `limit` cost units (Kubernetes' runtime limit by default); never raises."""
    meter = Meter(limit)
    token = METER.set(meter)
    try:
        value = compiled.evaluate(device)
    except CostLimitExceeded as exceeded:
        return SelectorResult(matched=False, error=str(exceeded), cost=meter.spent)
    except CELEvalError as error:
        return SelectorResult(matched=False, error=_describe(error), cost=meter.spent)
    except RecursionError:
        return SelectorResult(matched=False, error="nested too deeply to evaluate", cost=meter.spent)
    except Exception as error:  # noqa: BLE001 - celpy surfaces some user errors as plain exceptions
        return SelectorResult(matched=False, error=f"{type(error).__name__}: {error}", cost=meter.spent)
    finally:
        METER.reset(token)
    if isinstance(value, (ct.BoolType, bool)):
        return SelectorResult(matched=bool(value), cost=meter.spent)
    kind = type(value).__name__.removesuffix("Type").lower()
    return SelectorResult(matched=False, error=f"the result is {kind!r}, not 'bool'", cost=meter.spent)


def selector_matches(compiled: CompiledSelector, device: DeviceView) -> bool:
    """True only for a boolean true; an error is not a match (see `evaluate_selector`)."""
    return evaluate_selector(compiled, device).matched


class SelectorCache:
    """Memoizes selector results per (expression, class name, device name).

    A hit is also checked against the DeviceView it was computed for (identity first,
    then content), so a cache shared across fleets never serves a result for a class
    whose devices have since been edited under the same names.
    """

    def __init__(self) -> None:
        self._results: dict[tuple[str, str, str], tuple[DeviceView, SelectorResult]] = {}
        self.evaluations = 0

    def result(self, expression: str, class_name: str, device_name: str, device: DeviceView) -> SelectorResult:
        key = (expression, class_name, device_name)
        hit = self._results.get(key)
        if hit is not None and (hit[0] is device or hit[0] == device):
            return hit[1]
        result = evaluate_selector(compile_selector(expression), device)
        self.evaluations += 1
        self._results[key] = (device, result)
        return result

    def matches(self, expression: str, class_name: str, device_name: str, device: DeviceView) -> bool:
        return self.result(expression, class_name, device_name, device).matched
