"""Plan-time checks: names celpy would only reject when evaluated (unknown functions, wrong
arity, undeclared variables), literals that cannot parse (``quantity("80GB")``), non-RE2
patterns, and syntax errors worded with their line and column, so a typo fails ``plan``
instead of matching nothing."""

from __future__ import annotations

from collections.abc import Iterator

import lark
import re2
from celpy.celparser import CELParseError
from celpy.evaluation import CELEvalError

from modelplane.quantity import QuantityError
from modelplane.semver import SemverError

from .errors import CelError
from .evaluator import ENV
from .library import ARITY, BUILTINS, COMPREHENSIONS, EXTENSIONS, VARIABLES, regex
from .tree import Node, ParseTree, children, is_constant, simple_ident, token


def _call_sites(ast: ParseTree) -> Iterator[tuple[lark.Token, list[Node], Node | None]]:
    """Yields (name token, argument trees, receiver tree or None) for each call."""
    for node in ast.iter_subtrees():
        if node.data == "ident_arg":
            args = children(node.children[1]) if len(node.children) > 1 else []
            yield token(node.children[0]), args, None
        elif node.data == "member_dot_arg":
            args = children(node.children[2]) if len(node.children) > 2 else []
            yield token(node.children[1]), args, node.children[0]


def _check_regex(expression: str, name: lark.Token, args: list[Node]) -> None:
    """A constant pattern of `matches` must be RE2 (cel-go compiles it with the program)."""
    if not args or not is_constant(args[-1]):
        return
    try:
        pattern = ENV.program(args[-1]).evaluate({})
    except (CELEvalError, TypeError):
        return
    if isinstance(pattern, str):
        try:
            regex(str(pattern))
        except re2.error as error:
            raise CelError(expression, f"invalid regular expression for matches(): {error.args[0]!r}",
                           name.line, name.column) from None


def _check_literal(expression: str, name: lark.Token, args: list[Node]) -> None:
    """Reject `quantity("80GB")`-style typos now rather than at every evaluation."""
    if name.value not in ("quantity", "semver") or not all(is_constant(a) for a in args):
        return
    try:
        values = [ENV.program(a).evaluate({}) for a in args]
        EXTENSIONS[name.value](*values)
    except (QuantityError, SemverError) as error:
        raise CelError(expression, str(error), name.line, name.column) from None
    except (CELEvalError, TypeError):
        pass  # a wrong argument type is reported as a non-match at evaluation


def _check_macro(expression: str, name: lark.Token, args: list[Node], receiver: Node | None) -> str:
    """Validates a comprehension or `cel.bind` call; returns the variable it binds."""
    is_bind = name.value == "bind"
    if is_bind:
        ident = simple_ident(receiver)
        if ident is None or ident.value != "cel":
            raise CelError(expression, "unknown function 'bind' (did you mean cel.bind?)", name.line, name.column)
    want = 3 if is_bind else 2
    var = simple_ident(args[0]) if args else None
    if len(args) != want or var is None:
        label = "cel.bind" if is_bind else name.value
        raise CelError(expression, f"{label}() takes a variable name and {want - 1} expression(s)",
                       name.line, name.column)
    return str(var)


def _check_call(expression: str, name: lark.Token, args: list[Node], receiver: Node | None) -> None:
    fn, total = name.value, len(args) + (receiver is not None)
    if fn in ("has", "dyn") and receiver is None:
        if total != 1:
            raise CelError(expression, f"{fn}() takes exactly one argument", name.line, name.column)
    elif fn in ARITY:
        low, high = ARITY[fn]
        if not low <= total <= high:
            style = f"x.{fn}(...)" if receiver is not None else f"{fn}(...)"
            expected = str(low) if low == high else f"{low} or {high}"
            raise CelError(expression, f"{style} got {total} argument(s) counting the receiver, "
                           f"expects {expected}", name.line, name.column)
        _check_literal(expression, name, args)
    elif fn == "matches":
        _check_regex(expression, name, args)
    elif fn not in BUILTINS:
        raise CelError(expression, f"unknown function {fn!r}; available extensions: "
                       f"{', '.join(sorted(EXTENSIONS))}", name.line, name.column)


def check_names(expression: str, ast: ParseTree) -> None:
    """Unknown functions, wrong arity, bad literals and undeclared variables."""
    bound: set[str] = set()
    bind_receivers: set[tuple[int, int]] = set()
    for name, args, receiver in _call_sites(ast):
        if receiver is not None and (name.value in COMPREHENSIONS or name.value == "bind"):
            bound.add(_check_macro(expression, name, args, receiver))
            cel = simple_ident(receiver) if name.value == "bind" else None
            if cel is not None:
                bind_receivers.add((cel.line or 0, cel.column or 0))
        else:
            _check_call(expression, name, args, receiver)
    allowed = VARIABLES | bound | BUILTINS
    for node in ast.iter_subtrees():
        token = node.children[0] if node.data == "ident" else None
        if not isinstance(token, lark.Token) or token.value in allowed \
                or (token.line or 0, token.column or 0) in bind_receivers:
            continue
        raise CelError(expression, f"undeclared reference to {token.value!r} (the only variable is 'device')",
                       token.line, token.column)


def syntax_error(expression: str, error: CELParseError) -> CelError:
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
