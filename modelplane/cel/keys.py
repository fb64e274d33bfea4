"""The attribute and capacity keys a selector names literally, for the checks that compare them
with what a driver publishes."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass

import celpy.celtypes as ct
import lark
from celpy.celparser import CELParseError
from celpy.evaluation import CELEvalError

from .evaluator import ENV
from .tree import ParseTree, is_constant, simple_ident


@dataclass(frozen=True)
class DeviceKey:
    """An attribute or capacity a selector names literally: `device.<map>["<domain>"].<name>` or
    `device.<map>["<domain>"]["<name>"]`."""

    map: str       # "attributes" | "capacity"
    domain: str
    name: str


def _constant_string(tree: object) -> str | None:
    if not isinstance(tree, lark.Tree) or not is_constant(tree):
        return None
    try:
        value = ENV.program(tree).evaluate({})
    except (CELEvalError, TypeError):
        return None
    return str(value) if isinstance(value, ct.StringType) else None


def _only(tree: object, data: str) -> ParseTree | None:
    """`tree`, or the descendant reached through single children, whose rule is `data`."""
    while isinstance(tree, lark.Tree):
        if tree.data == data:
            return tree
        if len(tree.children) != 1:
            return None
        tree = tree.children[0]
    return None


def _device_map(tree: object) -> str | None:
    """'attributes' or 'capacity' when `tree` is `device.attributes` or `device.capacity`."""
    dot = _only(tree, "member_dot")
    if dot is None or len(dot.children) != 2 or not isinstance(dot.children[1], lark.Token):
        return None
    ident = simple_ident(dot.children[0])
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
        ast = ENV.compile(expression)
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
