"""Which clause of a device selector refused a device, and what the device says for the keys that
clause reads: `modelplane explain` answers "`device.attributes["gpu.nvidia.com"].model == "H100"`
is false: the class says LATEST-GPU-MODEL" instead of "request 'gpu' matched no device".

A selector's clauses are its top-level `&&` operands (`a && b && c` has three; `a || b`, a ternary
or a parenthesised conjunction is one clause), cut from the source text by the parser's positions;
each is a selector of its own, evaluated by the same rules and limits (modelplane.cel.selector)."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import lark
from celpy.celparser import CELParseError

from modelplane.quantity import Quantity
from modelplane.semver import Semver

from .device import Attribute, DeviceView
from .errors import CelError
from .evaluator import ENV
from .keys import DeviceKey, referenced_keys
from .selector import compile_selector, evaluate_selector


@functools.lru_cache(maxsize=1024)
def conjuncts(expression: str) -> tuple[str, ...]:
    """The top-level `&&` operands of `expression` as source text, in order; the whole expression
    when it has none (or does not parse: the caller reports its compile error instead)."""
    try:
        tree = ENV.compile(expression)
    except CELParseError:
        return (expression,)
    node: object = tree
    for rule in ("expr", "conditionalor"):
        if not (isinstance(node, lark.Tree) and node.data == rule and len(node.children) == 1):
            return (expression,)
        node = node.children[0]
    if not (isinstance(node, lark.Tree) and node.data == "conditionaland"):
        return (expression,)
    parts: list[object] = []
    while isinstance(node, lark.Tree) and node.data == "conditionaland" and len(node.children) == 2:
        parts.append(node.children[1])
        node = node.children[0]
    parts.append(node.children[0] if isinstance(node, lark.Tree) and len(node.children) == 1 else node)
    texts = []
    end = 0
    for part in reversed(parts):
        meta = getattr(part, "meta", None)
        # Positions that do not cut the text into consecutive pieces (a macro such as cel.bind
        # rewrites its subtree) leave the expression whole.
        start, stop = getattr(meta, "start_pos", None), getattr(meta, "end_pos", None)
        if not (isinstance(start, int) and isinstance(stop, int)) or start < end or stop <= start:
            return (expression,)
        texts.append(expression[start:stop].strip())
        end = stop
    return tuple(texts)


@dataclass(frozen=True)
class Read:
    """A key a clause names and the device's value for it (None: the device does not have it)."""

    key: DeviceKey
    value: str | None

    def __str__(self) -> str:
        shown = "not declared" if self.value is None else self.value
        return f"{self.key.map} {self.key.domain}/{self.key.name} = {shown}"


@dataclass(frozen=True)
class ClauseVerdict:
    """The first clause of a selector that does not hold on a device (None when all hold), how
    it failed (false, or the error), and what the device says for the keys it reads."""

    expression: str
    clause: str | None
    error: str | None = None
    reads: tuple[Read, ...] = ()

    @property
    def matched(self) -> bool:
        return self.clause is None

    def describe(self) -> str:
        if self.clause is None:
            return f"`{self.expression}` holds"
        says = "; ".join(str(r) for r in self.reads)
        how = f"errors ({self.error})" if self.error else "is false"
        return f"`{self.clause}` {how}" + (f": the class says {says}" if says else "")


def _shown(value: Attribute | Quantity) -> str:
    if isinstance(value, (Semver, Quantity)):
        return str(value)
    return repr(value) if isinstance(value, bool) else str(value)


def _reads(clause: str, device: DeviceView) -> tuple[Read, ...]:
    out = []
    for key in referenced_keys(clause):
        table = device.attributes if key.map == "attributes" else device.capacity
        value = (table.get(key.domain) or {}).get(key.name)
        out.append(Read(key, None if value is None else _shown(value)))
    return tuple(out)


def explain_selector(expression: str, device: DeviceView) -> ClauseVerdict:
    """Evaluate `expression` on `device` clause by clause (an invalid expression raises
    CelError, as compile_selector does)."""
    compile_selector(expression)
    for clause in conjuncts(expression):
        try:
            compiled = compile_selector(clause)
        except CelError:
            # A clause that is no expression on its own (it uses a cel.bind variable of another):
            # the selector is judged as a whole.
            return _whole(expression, device)
        result = evaluate_selector(compiled, device)
        if not result.matched:
            return ClauseVerdict(expression, clause, result.error, _reads(clause, device))
    return ClauseVerdict(expression, None)


def _whole(expression: str, device: DeviceView) -> ClauseVerdict:
    result = evaluate_selector(compile_selector(expression), device)
    if result.matched:
        return ClauseVerdict(expression, None)
    return ClauseVerdict(expression, expression, result.error, _reads(expression, device))
