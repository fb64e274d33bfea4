"""Device-selector CEL: cel-python (celpy) plus the Kubernetes DRA extensions.

celpy parses and evaluates; this module adds the ``quantity``/``semver`` libraries,
``cel.bind``, the ``device`` activation and a plan-time check for names celpy would
only reject when evaluated (so a typo fails ``plan`` instead of matching nothing).
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import celpy
import celpy.celtypes as ct
import lark
import re2
from celpy.celparser import CELParseError
from celpy.evaluation import CELEvalError, Evaluator, base_functions

from modelplane.cel_grammar import environment
from modelplane.celcost import (
    BIND_COST,
    CALL_COST,
    LIST_CREATE_COST,
    MACRO_BASE_COST,
    MACRO_STEP_COST,
    MACROS,
    MAP_CREATE_COST,
    MAX_COST,
    MAX_EXPRESSION_LENGTH,
    MAX_NESTING,
    METER,
    REGEX_FACTOR,
    SELECT_COST,
    STRING_FACTOR,
    UNKNOWN,
    CostLimitExceeded,
    Meter,
    ParseTree,
    charge,
    estimated_cost,
    nesting,
    runtime_size,
)
from modelplane.quantity import Quantity, QuantityError
from modelplane.semver import Semver, SemverError

__all__ = [
    "CelError", "CompiledSelector", "DeviceKey", "DeviceView", "SelectorCache", "SelectorResult",
    "compile_selector", "evaluate_selector", "referenced_keys", "selector_matches",
]


_SHOWN = 120   # characters of a selector an error message shows


class CelError(ValueError):
    """A selector that cannot be compiled; the message names the problem and where."""

    def __init__(self, expression: str, message: str, line: int | None = None, column: int | None = None) -> None:
        self.expression, self.message, self.line, self.column = expression, message, line, column
        text = f"invalid CEL selector: {message}"
        if line is not None and column is not None:
            lines = expression.split("\n")
            source = lines[min(line, len(lines)) - 1]
            start = max(0, column - 1 - _SHOWN // 2)   # a long line is shown around the column
            shown = source[start:start + _SHOWN]
            text += f" (line {line}, column {column})\n    {shown}\n    {' ' * (column - 1 - start)}^"
        else:
            text += f"\n    {expression[:_SHOWN]}" + ("..." if len(expression) > _SHOWN else "")
        super().__init__(text)


# --- CEL values for the Kubernetes libraries --------------------------------------------

class _Wrapped:
    """Equality but deliberately no ordering: Kubernetes has no `<` on these types."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
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


class CelQuantity(_Wrapped):
    pass


class CelSemver(_Wrapped):
    pass


def _no_overload(name: str, *args: Any) -> TypeError:
    kinds = ", ".join(type(a).__name__ for a in args)
    return TypeError(f"no such overload: {name}({kinds})")


def _string(name: str, value: Any) -> str:
    if not isinstance(value, str):
        raise _no_overload(name, value)
    return str(value)


def _quantity_arg(name: str, value: Any) -> Quantity:
    if not isinstance(value, CelQuantity):
        raise _no_overload(name, value)
    quantity: Quantity = value.value
    return quantity


def _normalize_arg(name: str, normalize: Any) -> bool:
    if not isinstance(normalize, ct.BoolType):
        raise _no_overload(name, normalize)
    return bool(normalize)


_TRUE, _FALSE = ct.BoolType(True), ct.BoolType(False)  # noqa: FBT003 - CEL's booleans

# Selectors re-parse the same literals on every evaluation; results are immutable.
_parse_quantity = functools.lru_cache(maxsize=4096)(Quantity.parse)


def _cel_quantity(text: Any) -> CelQuantity:
    return CelQuantity(_parse_quantity(_string("quantity", text)))


def _is_quantity(text: Any) -> ct.BoolType:
    try:
        Quantity.parse(_string("isQuantity", text))
    except QuantityError:
        return _FALSE
    return _TRUE


def _cel_semver(text: Any, normalize: Any = _FALSE) -> CelSemver:
    return CelSemver(Semver.parse(_string("semver", text), normalize=_normalize_arg("semver", normalize)))


def _is_semver(text: Any, normalize: Any = _FALSE) -> ct.BoolType:
    try:
        Semver.parse(_string("isSemver", text), normalize=_normalize_arg("isSemver", normalize))
    except SemverError:
        return _FALSE
    return _TRUE


def _compare(name: str, left: Any, right: Any) -> int:
    if isinstance(left, CelQuantity) and isinstance(right, CelQuantity):
        return int(left.value.compare_to(right.value))
    if isinstance(left, CelSemver) and isinstance(right, CelSemver):
        return int(left.value.compare_to(right.value))
    raise _no_overload(name, left, right)


def _arith(name: str, op: Callable[[Quantity, Any], Quantity]) -> Callable[[Any, Any], CelQuantity]:
    def apply(left: Any, right: Any) -> CelQuantity:
        if isinstance(right, CelQuantity):
            right = right.value
        elif isinstance(right, ct.IntType) and not isinstance(right, ct.BoolType):
            right = int(right)
        else:
            raise _no_overload(name, left, right)
        return CelQuantity(op(_quantity_arg(name, left), right))
    return apply


def _semver_part(name: str) -> Callable[[Any], ct.IntType]:
    def part(version: Any) -> ct.IntType:
        if not isinstance(version, CelSemver):
            raise _no_overload(name, version)
        return ct.IntType(getattr(version.value, name))
    return part


# Each is callable as `f(x, ...)` and as `x.f(...)`: celpy passes the receiver first.
EXTENSIONS: dict[str, Callable[..., Any]] = {
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
_ARITY: dict[str, tuple[int, int]] = {
    "quantity": (1, 1), "isQuantity": (1, 1), "semver": (1, 2), "isSemver": (1, 2),
    "compareTo": (2, 2), "isGreaterThan": (2, 2), "isLessThan": (2, 2), "add": (2, 2), "sub": (2, 2),
    "sign": (1, 1), "isInteger": (1, 1), "asInteger": (1, 1), "asApproximateFloat": (1, 1),
    "major": (1, 1), "minor": (1, 1), "patch": (1, 1),
}
_COMPREHENSIONS = MACROS
# celpy's own non-standard `reduce`/`min` macros are left out: Kubernetes would reject them.
_BUILTINS = {name for name in base_functions if name[0].isalpha()}
_VARIABLES = {"device"}


# --- runtime cost of functions ----------------------------------------------------------

_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False   # re2 would print parse errors on stderr itself


@functools.lru_cache(maxsize=1024)
def _regex(pattern: str) -> Any:
    """RE2, as cel-go: linear time whatever the pattern (no catastrophic backtracking)."""
    return re2.compile(pattern, _RE2_OPTIONS)


def _matches(text: Any, pattern: Any) -> ct.BoolType:
    if not isinstance(text, str) or not isinstance(pattern, str):
        raise _no_overload("matches", text, pattern)
    try:
        compiled = _regex(str(pattern))
    except re2.error as error:
        raise ValueError(f"invalid regular expression: {error.args[0]!r}") from None
    return ct.BoolType(compiled.search(str(text)) is not None)


def _sized(value: Any) -> bool:
    return isinstance(value, (str, bytes, list, tuple, dict))


def _call_cost(name: str, args: tuple[Any, ...]) -> int:
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


def _charged(name: str, function: Callable[..., Any]) -> Callable[..., Any]:
    def call(*args: Any) -> Any:
        charge(_call_cost(name, args))
        return function(*args)
    call.__name__ = getattr(function, "__name__", name)
    return call


# Every function a selector can call, each charging its cost before it runs.
def _all_functions() -> dict[str, Callable[..., Any]]:
    functions: dict[str, Callable[..., Any]] = dict(base_functions)
    functions.update(EXTENSIONS)
    functions["matches"] = _matches
    return {name: _charged(name, function) for name, function in functions.items()}


FUNCTIONS = _all_functions()


# --- evaluation --------------------------------------------------------------------------

def _children(node: object) -> list[Any]:
    return list(node.children) if isinstance(node, lark.Tree) else []


def _bind_parts(tree: ParseTree) -> tuple[Any, ...] | None:
    """The (variable, init, body) of a `cel.bind(...)` call, else None."""
    receiver = tree.children[0]
    if str(tree.children[1]) != "bind" or len(tree.children) != 3:
        return None
    ident = _simple_ident(receiver)
    if ident is None or str(ident) != "cel":
        return None
    return tuple(_children(tree.children[2]))


def _eval_error(message: str, tree: ParseTree) -> CELEvalError:
    return CELEvalError(message, TypeError, (message,), tree=tree)


class _Evaluator(Evaluator):
    """celpy's interpreter plus the `cel.bind` macro Kubernetes provides, comprehensions
    that stop where cel-go's do (`all` at the first false, `exists` at the first true), and
    cel-go's runtime cost charged to the evaluation's meter (modelplane.celcost): nodes
    here, functions in `FUNCTIONS`."""

    def sub_evaluator(self, ast: ParseTree) -> Evaluator:
        return _Evaluator(ast, activation=self.activation)

    def primary(self, tree: ParseTree) -> Any:
        kind = getattr(tree.children[0], "data", None)
        if kind in ("ident", "dot_ident"):
            charge(SELECT_COST)
        elif kind == "list_lit":
            charge(LIST_CREATE_COST)
        elif kind == "map_lit":
            charge(MAP_CREATE_COST)
        elif kind == "ident_arg" and str(_children(tree.children[0])[0]) in ("has", "dyn"):
            charge(CALL_COST)   # every other call is charged by its function in FUNCTIONS
        return super().primary(tree)

    def member_dot(self, tree: ParseTree) -> Any:
        charge(SELECT_COST)
        return super().member_dot(tree)

    def member_dot_arg(self, tree: ParseTree) -> Any:
        parts = _bind_parts(tree)
        if parts is not None:
            return self._bind(*parts)
        name = str(tree.children[1])
        if name in MACROS:
            return self._comprehension(name, tree)
        return super().member_dot_arg(tree)

    def _bind(self, var_tree: ParseTree, init_tree: ParseTree, body_tree: ParseTree) -> Any:
        charge(BIND_COST)
        init = self.visit(init_tree)
        if isinstance(init, CELEvalError):
            return init
        try:
            return self.sub_evaluator(body_tree).evaluate({_ident_name(var_tree): init})
        except CELEvalError as error:
            return error

    def _comprehension(self, name: str, tree: ParseTree) -> Any:
        target = self.visit(_subtree(tree.children[0]))
        if isinstance(target, CELEvalError):
            return target
        if not isinstance(target, (ct.ListType, ct.MapType)):
            return _eval_error(f"no such overload: {type(target).__name__}.{name}()", tree)
        var_tree, body_tree = _children(tree.children[2])
        var = _ident_name(var_tree)
        body = self.sub_evaluator(body_tree)
        step = MACRO_STEP_COST[name]
        charge(MACRO_BASE_COST[name])

        def each(item: Any) -> Any:
            charge(step)
            try:
                return body.evaluate({var: item})
            except CELEvalError as error:
                return error

        if name in ("all", "exists"):
            # errors count only if no element decides: `error && false` is false in CEL
            decisive = name == "exists"
            first_error = None
            for item in target:
                value = each(item)
                if isinstance(value, ct.BoolType):
                    if bool(value) is decisive:
                        return ct.BoolType(decisive)
                elif first_error is None:
                    first_error = value if isinstance(value, CELEvalError) else _eval_error(
                        f"{name}() needs a boolean predicate, got {type(value).__name__}", tree)
            return first_error if first_error is not None else ct.BoolType(not decisive)
        results = []
        for item in target:
            value = each(item)
            if isinstance(value, CELEvalError):
                return value
            if name != "map" and not isinstance(value, ct.BoolType):
                return _eval_error(f"{name}() needs a boolean predicate, got {type(value).__name__}", tree)
            results.append((item, value))
        if name == "map":
            return ct.ListType(value for _, value in results)
        if name == "filter":
            return ct.ListType(item for item, keep in results if keep)
        return ct.BoolType(sum(1 for _, keep in results if keep) == 1)   # exists_one


class _Runner(celpy.InterpretedRunner):
    def evaluate(self, context: Any) -> Any:
        return _Evaluator(ast=self.ast, activation=self.new_activation()).evaluate(context)


_ENV = environment(_Runner)   # the parser from the user's cache (modelplane.cel_grammar)


# --- plan-time checks ----------------------------------------------------------------------

def _simple_ident(tree: Any) -> lark.Token | None:
    """The identifier token if `tree` is nothing but a bare name."""
    while isinstance(tree, lark.Tree) and len(tree.children) == 1:
        if tree.data == "ident":
            child = tree.children[0]
            return child if isinstance(child, lark.Token) else None
        tree = tree.children[0]
    return None


def _ident_name(tree: Any) -> str:
    """The bound variable of a comprehension or cel.bind (checked at compile)."""
    token = _simple_ident(tree)
    return str(token) if token is not None else ""


def _subtree(node: object) -> ParseTree:
    if not isinstance(node, lark.Tree):
        raise TypeError(f"expected a tree, got {type(node).__name__}")
    return node


def _token(node: object) -> lark.Token:
    if not isinstance(node, lark.Token):
        raise TypeError(f"expected a token, got {type(node).__name__}")
    return node


def _is_constant(tree: ParseTree) -> bool:
    dynamic = {"ident", "ident_arg", "member_dot", "member_dot_arg", "dot_ident", "dot_ident_arg"}
    return not any(node.data in dynamic for node in tree.iter_subtrees())


def _call_sites(ast: ParseTree) -> Iterator[tuple[lark.Token, list[Any], Any]]:
    """Yields (name token, argument trees, receiver tree or None) for each call."""
    for node in ast.iter_subtrees():
        if node.data == "ident_arg":
            args = _children(node.children[1]) if len(node.children) > 1 else []
            yield _token(node.children[0]), args, None
        elif node.data == "member_dot_arg":
            args = _children(node.children[2]) if len(node.children) > 2 else []
            yield _token(node.children[1]), args, node.children[0]


def _check_regex(expression: str, name: lark.Token, args: list[Any]) -> None:
    """A constant pattern of `matches` must be RE2 (cel-go compiles it with the program)."""
    if not args or not _is_constant(args[-1]):
        return
    try:
        pattern = _ENV.program(args[-1]).evaluate({})
    except (CELEvalError, TypeError):
        return
    if isinstance(pattern, str):
        try:
            _regex(str(pattern))
        except re2.error as error:
            raise CelError(expression, f"invalid regular expression for matches(): {error.args[0]!r}",
                           name.line, name.column) from None


def _check_literal(expression: str, name: lark.Token, args: list[Any]) -> None:
    """Reject `quantity("80GB")`-style typos now rather than at every evaluation."""
    if name.value not in ("quantity", "semver") or not all(_is_constant(a) for a in args):
        return
    try:
        values = [_ENV.program(a).evaluate({}) for a in args]
        EXTENSIONS[name.value](*values)
    except (QuantityError, SemverError) as error:
        raise CelError(expression, str(error), name.line, name.column) from None
    except (CELEvalError, TypeError):
        pass  # a wrong argument type is reported as a non-match at evaluation


def _check_macro(expression: str, name: lark.Token, args: list[Any], receiver: Any) -> str:
    """Validates a comprehension or `cel.bind` call; returns the variable it binds."""
    is_bind = name.value == "bind"
    if is_bind:
        ident = _simple_ident(receiver)
        if ident is None or ident.value != "cel":
            raise CelError(expression, "unknown function 'bind' (did you mean cel.bind?)", name.line, name.column)
    want = 3 if is_bind else 2
    var = _simple_ident(args[0]) if args else None
    if len(args) != want or var is None:
        label = "cel.bind" if is_bind else name.value
        raise CelError(expression, f"{label}() takes a variable name and {want - 1} expression(s)",
                       name.line, name.column)
    return str(var)


def _check_call(expression: str, name: lark.Token, args: list[Any], receiver: Any) -> None:
    fn, total = name.value, len(args) + (receiver is not None)
    if fn in ("has", "dyn") and receiver is None:
        if total != 1:
            raise CelError(expression, f"{fn}() takes exactly one argument", name.line, name.column)
    elif fn in _ARITY:
        low, high = _ARITY[fn]
        if not low <= total <= high:
            style = f"x.{fn}(...)" if receiver is not None else f"{fn}(...)"
            expected = str(low) if low == high else f"{low} or {high}"
            raise CelError(expression, f"{style} got {total} argument(s) counting the receiver, "
                           f"expects {expected}", name.line, name.column)
        _check_literal(expression, name, args)
    elif fn == "matches":
        _check_regex(expression, name, args)
    elif fn not in _BUILTINS:
        raise CelError(expression, f"unknown function {fn!r}; available extensions: "
                       f"{', '.join(sorted(EXTENSIONS))}", name.line, name.column)


def _check_names(expression: str, ast: ParseTree) -> None:
    """Unknown functions, wrong arity, bad literals and undeclared variables."""
    bound: set[str] = set()
    bind_receivers: set[tuple[int, int]] = set()
    for name, args, receiver in _call_sites(ast):
        if receiver is not None and (name.value in _COMPREHENSIONS or name.value == "bind"):
            bound.add(_check_macro(expression, name, args, receiver))
            cel = _simple_ident(receiver) if name.value == "bind" else None
            if cel is not None:
                bind_receivers.add((cel.line or 0, cel.column or 0))
        else:
            _check_call(expression, name, args, receiver)
    allowed = _VARIABLES | bound | _BUILTINS
    for node in ast.iter_subtrees():
        token = node.children[0] if node.data == "ident" else None
        if not isinstance(token, lark.Token) or token.value in allowed \
                or (token.line or 0, token.column or 0) in bind_receivers:
            continue
        raise CelError(expression, f"undeclared reference to {token.value!r} (the only variable is 'device')",
                       token.line, token.column)


def _syntax_error(expression: str, error: CELParseError) -> CelError:
    cause = error.__context__
    if isinstance(cause, lark.exceptions.UnexpectedToken):
        found = cause.token
        if found.type == "$END":
            lines = expression.split("\n")
            line, column = len(lines), len(lines[-1]) + 1
            return CelError(expression, "syntax error: unexpected end of expression", line, column)
        what = f"unexpected {found.value!r}"
    elif isinstance(cause, lark.exceptions.UnexpectedCharacters):
        what = f"unexpected character {expression[cause.pos_in_stream or 0]!r}"
    else:
        what = "syntax error"
    if ".?" in expression:
        what += " (optional field selection `.?` is not supported here; guard with has(...))"
    return CelError(expression, f"syntax error: {what}", error.line, error.column)


# --- public API ------------------------------------------------------------------------------

@dataclass(frozen=True)
class CompiledSelector:
    expression: str
    _program: Any = field(repr=False, compare=False)

    def evaluate(self, device: DeviceView) -> Any:
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
        ast = _ENV.compile(expression)
    except CELParseError as error:
        return _syntax_error(expression, error)
    depth = nesting(ast)
    if depth > MAX_NESTING:
        return CelError(expression, f"nested {depth} levels deep (parentheses, brackets, calls, field "
                        f"selections and operators); at most {MAX_NESTING} are supported: split it into "
                        "several selectors or use cel.bind")
    try:
        _check_names(expression, ast)
    except CelError as error:
        return error
    cost = estimated_cost(ast)
    if cost > MAX_COST:
        shown = "unbounded" if cost >= UNKNOWN else str(cost)
        return CelError(expression, f"too complex: its estimated worst-case cost ({shown}) exceeds the limit "
                        f"{MAX_COST} Kubernetes applies to a device selector (CELSelectorExpressionMaxCost); "
                        "iterate over fewer or smaller lists, or nest fewer comprehensions")
    return CompiledSelector(expression, _ENV.program(ast, functions=FUNCTIONS))


def compile_selector(expression: str) -> CompiledSelector:
    result = _compile(expression)
    if isinstance(result, CelError):
        raise result
    return result


@dataclass(frozen=True)
class DeviceKey:
    """An attribute or capacity a selector names literally: `device.<map>["<domain>"].<name>` or
    `device.<map>["<domain>"]["<name>"]`."""

    map: str       # "attributes" | "capacity"
    domain: str
    name: str


def _only(tree: object, data: str) -> ParseTree | None:
    """`tree`, or the descendant reached through single children, whose rule is `data`."""
    while isinstance(tree, lark.Tree):
        if tree.data == data:
            return tree
        if len(tree.children) != 1:
            return None
        tree = tree.children[0]
    return None


def _constant_string(tree: object) -> str | None:
    if not isinstance(tree, lark.Tree) or not _is_constant(tree):
        return None
    try:
        value = _ENV.program(tree).evaluate({})
    except (CELEvalError, TypeError):
        return None
    return str(value) if isinstance(value, ct.StringType) else None


def _device_map(tree: object) -> str | None:
    """'attributes' or 'capacity' when `tree` is `device.attributes` or `device.capacity`."""
    dot = _only(tree, "member_dot")
    if dot is None or len(dot.children) != 2 or not isinstance(dot.children[1], lark.Token):
        return None
    ident = _simple_ident(dot.children[0])
    name = dot.children[1].value
    return name if ident is not None and ident.value == "device" and name in ("attributes", "capacity") else None


def _preorder(tree: ParseTree) -> Iterator[ParseTree]:
    """Subtrees in source order (lark's own top-down walk is untyped)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed([c for c in node.children if isinstance(c, lark.Tree)]))


@functools.lru_cache(maxsize=1024)
def referenced_keys(expression: str) -> tuple[DeviceKey, ...]:
    """The attribute and capacity keys a selector names with literal strings, in order, once each.
    Keys reached any other way (a computed domain, a comprehension over a map) are not listed; an
    expression that does not parse names none."""
    try:
        ast = _ENV.compile(expression)
    except CELParseError:
        return ()
    keys: list[DeviceKey] = []
    for node in _preorder(ast):
        if node.data not in ("member_dot", "member_index") or len(node.children) != 2:
            continue
        domain_index = _only(node.children[0], "member_index")
        if domain_index is None or len(domain_index.children) != 2:
            continue
        kind, domain = _device_map(domain_index.children[0]), _constant_string(domain_index.children[1])
        last = node.children[1]
        name = last.value if node.data == "member_dot" and isinstance(last, lark.Token) else _constant_string(last)
        if kind is not None and domain is not None and name is not None:
            keys.append(DeviceKey(kind, domain, name))
    return tuple(dict.fromkeys(keys))


class _Domains(ct.MapType):
    """Unknown domains read as empty maps, as in Kubernetes."""

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str) and not dict.__contains__(self, key):
            return ct.MapType()
        return super().__getitem__(key)


def _attribute_value(key: str, raw: Any) -> Any:
    if isinstance(raw, Mapping):
        if len(raw) != 1:
            raise ValueError(f"attribute {key!r}: expected exactly one of string/int/bool/version, got {dict(raw)!r}")
        ((kind, value),) = raw.items()
        if kind == "string" and isinstance(value, str):
            return value
        if kind == "bool" and isinstance(value, bool):
            return value
        if kind == "int" and isinstance(value, int) and not isinstance(value, bool):
            return value
        if kind == "version" and isinstance(value, str):
            try:
                return Semver.parse(value)
            except SemverError as error:
                raise ValueError(f"attribute {key!r}: {error}") from None
        raise ValueError(f"attribute {key!r}: unsupported typed value {dict(raw)!r}")
    if isinstance(raw, (str, bool, int, Semver)):
        return raw
    raise ValueError(f"attribute {key!r}: unsupported value {raw!r}")


def _capacity_value(key: str, raw: Any) -> Quantity:
    value = raw.get("value") if isinstance(raw, Mapping) else raw
    if isinstance(value, Quantity):
        return value
    try:
        text: Any = value   # Quantity.parse refuses a non-string with a QuantityError
        return Quantity.parse(text)
    except QuantityError as error:
        raise ValueError(f"capacity {key!r}: {error}") from None


def _to_cel(value: Any) -> Any:
    if isinstance(value, bool):
        return ct.BoolType(value)
    if isinstance(value, int):
        return ct.IntType(value)
    if isinstance(value, str):
        return ct.StringType(value)
    if isinstance(value, Semver):
        return CelSemver(value)
    return CelQuantity(value)


def _by_domain(driver: str, raw: Mapping[str, Any], convert: Callable[[str, Any], Any]) -> dict[str, dict[str, Any]]:
    domains: dict[str, dict[str, Any]] = {}
    for key in sorted(raw):
        domain, _, name = key.partition("/") if "/" in key else (driver, "", key)
        domains.setdefault(domain, {})[name] = convert(key, raw[key])
    return domains


def _cel_domains(domains: Mapping[str, Mapping[str, Any]]) -> _Domains:
    return _Domains({
        ct.StringType(d): ct.MapType({ct.StringType(n): _to_cel(v) for n, v in names.items()})
        for d, names in domains.items()
    })


@dataclass(frozen=True)
class DeviceView:
    """One device kind as CEL sees it: attributes/capacity grouped by domain, then name."""

    driver: str
    attributes: Mapping[str, Mapping[str, Any]]
    capacity: Mapping[str, Mapping[str, Quantity]]
    activation: ct.MapType = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "activation", ct.MapType({
            ct.StringType("driver"): ct.StringType(self.driver),
            ct.StringType("attributes"): _cel_domains(self.attributes),
            ct.StringType("capacity"): _cel_domains(self.capacity),
        }))

    def __hash__(self) -> int:
        # Explicit because the mapping fields are not hashable; lets callers key dicts by view.
        def frozen(domains: Mapping[str, Mapping[str, Any]]) -> frozenset[tuple[str, frozenset[tuple[str, Any]]]]:
            return frozenset((d, frozenset(names.items())) for d, names in domains.items())
        return hash((self.driver, frozen(self.attributes), frozen(self.capacity)))

    @classmethod
    def from_spec(
        cls, driver: str, attributes_raw: Mapping[str, Any] | None, capacity_raw: Mapping[str, Any] | None
    ) -> DeviceView:
        """Raises ValueError naming the key when a typed value is malformed."""
        return cls(
            driver,
            _by_domain(driver, attributes_raw or {}, _attribute_value),
            _by_domain(driver, capacity_raw or {}, _capacity_value),
        )


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
