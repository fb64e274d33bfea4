"""CEL cost limits for DRA device selectors, as the Kubernetes apiserver applies them.

Kubernetes (k8s.io/dynamic-resource-allocation/cel/compile.go, validated in
pkg/apis/resource/validation) bounds a selector three ways, and so do we:

* length: at most `MAX_EXPRESSION_LENGTH` characters (`CELSelectorExpressionMaxLength`);
* estimated cost: the worst case over every device the API allows, computed from the
  expression alone, must not exceed `MAX_COST` (`CELSelectorExpressionMaxCost`); it is
  checked at load, so an over-budget selector is an error with its field path;
* runtime cost: one evaluation stops with an error once it has spent `MAX_COST`
  (`cel.CostLimit(CELSelectorExpressionMaxCost)`), whatever the estimate said.

The estimate follows cel-go's checker/cost.go over celpy's parse tree: every identifier
or field selection costs 1, a call 1, a list literal 10, a map literal 30, a string
operation 0.1 per character, and a comprehension multiplies its loop body by the size of
what it ranges over. Sizes come from the DRA API's bounds on a device (`DEVICE` below).
Two deliberate differences, both stricter: celpy copies lists, so a list concatenation
costs 0.1 per element (cel-go concatenates lazily and charges 1), and nesting is bounded
by `MAX_NESTING` (ours: celpy evaluates recursively in Python; cel-go's parser allows
250 levels, far past any selector in use).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field, replace

import lark

from .tree import ParseTree, children, simple_ident

# k8s.io/api/resource/v1: CELSelectorExpressionMaxLength, CELSelectorExpressionMaxCost.
MAX_EXPRESSION_LENGTH = 10 * 1024
MAX_COST = 1_000_000
# Ours: levels of parentheses, brackets, calls, selections and operators one selector may
# nest. Evaluating a level takes about 20 Python frames, and this keeps a selector well
# inside the interpreter's recursion limit wherever the scheduler calls it from.
MAX_NESTING = 24
# The DRA API's bounds on what a selector reads (k8s.io/api/resource/v1):
ATTRIBUTES_PER_DEVICE = 32        # ResourceSliceMaxAttributesAndCapacitiesPerDevice
MAX_DOMAIN_LENGTH = 63            # DeviceMaxDomainLength
MAX_ID_LENGTH = 32                # DeviceMaxIDLength
MAX_DRIVER_LENGTH = 63            # DriverNameMaxLength
MAX_ATTRIBUTE_VALUE_LENGTH = 64   # DeviceAttributeMaxValueLength

UNKNOWN = 2**64 - 1               # cel-go's "unknown size / cost": saturates

# cel-go's cost constants (common/cost.go).
SELECT_COST = 1
CALL_COST = 1
LIST_CREATE_COST = 10
MAP_CREATE_COST = 30
STRING_FACTOR = 0.1
REGEX_FACTOR = 0.25


def _add(*costs: int) -> int:
    return min(UNKNOWN, sum(costs))


def _mul(a: int, b: int) -> int:
    return UNKNOWN if a and b and a >= UNKNOWN // b else a * b


def _factor(size: int, factor: float) -> int:
    return UNKNOWN if size >= UNKNOWN else math.ceil(size * factor)


# --- runtime cost -----------------------------------------------------------------------

class CostLimitExceeded(Exception):  # noqa: N818 - named as cel-go's error reads
    """An evaluation spent its budget. Deliberately not a ValueError/TypeError, so celpy's
    error-as-value handling (`||`, `has()`, macros) cannot swallow it."""

    def __init__(self, spent: int, limit: int) -> None:
        super().__init__(f"operation cancelled: actual cost limit exceeded ({spent} > {limit})")
        self.spent, self.limit = spent, limit


class Meter:
    """Cost spent by one evaluation; `charge` raises once it passes the limit."""

    __slots__ = ("limit", "spent")

    def __init__(self, limit: int = MAX_COST) -> None:
        self.spent = 0
        self.limit = limit

    def charge(self, cost: int) -> None:
        self.spent += cost
        if self.spent > self.limit:
            raise CostLimitExceeded(self.spent, self.limit)


# The meter of the evaluation running in this context (None outside one): the CEL
# functions celpy calls by name reach it without a parameter.
METER: ContextVar[Meter | None] = ContextVar("modelplane_cel_meter", default=None)


def charge(cost: int) -> None:
    meter = METER.get()
    if meter is not None:
        meter.charge(cost)


def runtime_size(value: object) -> int:
    return len(value) if isinstance(value, (str, bytes, list, tuple, dict)) else 1


# --- nesting --------------------------------------------------------------------------------

# Parse-tree nodes that add a level when they have an operator, a call or a selection;
# the grammar's pass-through levels (a `relation` with one child) do not count.
_LEVEL_NODES = {"expr": 3, "conditionalor": 2, "conditionaland": 2, "relation": 2, "addition": 2,
                "multiplication": 2, "unary": 2}
_ALWAYS_LEVEL = {"member_dot", "member_dot_arg", "member_index", "member_object", "paren_expr",
                 "list_lit", "map_lit", "ident_arg", "dot_ident_arg"}


def nesting(tree: ParseTree) -> int:
    """How many levels deep the expression nests (iteratively: any depth is measured)."""
    deepest = 0
    stack: list[tuple[ParseTree, int]] = [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        if node.data in _ALWAYS_LEVEL or len(node.children) >= _LEVEL_NODES.get(node.data, UNKNOWN):
            depth += 1
        deepest = max(deepest, depth)
        stack.extend((c, depth) for c in node.children if isinstance(c, lark.Tree))
    return deepest


# --- estimated cost ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Est:
    """What the estimate knows of a value: the worst-case cost of computing it, its size
    (characters, elements or entries; UNKNOWN if unbounded), and for lists and maps the
    estimate of an element (a map's values) and of a key; for `device`, its fields."""

    cost: int = 0
    size: int = 1
    kind: str = "any"                      # bool int double string bytes list map quantity ...
    elem: Est | None = None
    key: Est | None = None
    fields: Mapping[str, Est] = field(default_factory=dict)

    def costing(self, cost: int) -> Est:
        return replace(self, cost=cost)


ANY = Est(size=UNKNOWN)
BOOL = Est(kind="bool")
INT = Est(kind="int")


def _string(size: int) -> Est:
    return Est(kind="string", size=size)


def _map(size: int, key: Est, value: Est) -> Est:
    return Est(kind="map", size=size, key=key, elem=value)


_ATTRIBUTE = Est(kind="any", size=MAX_ATTRIBUTE_VALUE_LENGTH)
_QUANTITY = Est(kind="quantity")
DEVICE = Est(kind="device", size=4, fields={
    "driver": _string(MAX_DRIVER_LENGTH),
    "allowMultipleAllocations": BOOL,
    "attributes": _map(ATTRIBUTES_PER_DEVICE, _string(MAX_DOMAIN_LENGTH),
                       _map(ATTRIBUTES_PER_DEVICE, _string(MAX_ID_LENGTH), _ATTRIBUTE)),
    "capacity": _map(ATTRIBUTES_PER_DEVICE, _string(MAX_DOMAIN_LENGTH),
                     _map(ATTRIBUTES_PER_DEVICE, _string(MAX_ID_LENGTH), _QUANTITY)),
})


def _union(a: Est, b: Est) -> Est:
    if a.kind != b.kind:
        return Est(size=max(a.size, b.size))
    elem = _union(a.elem, b.elem) if a.elem and b.elem else None
    key = _union(a.key, b.key) if a.key and b.key else None
    return Est(size=max(a.size, b.size), kind=a.kind, elem=elem, key=key,
               fields=a.fields if a.fields == b.fields else {})


# Per-iteration cost of each comprehension's loop step and condition outside its body
# (cel-go's macro expansions: `all` is `@not_strictly_false(accu)` / `accu && p`, ...),
# and the fixed cost of its accumulator and result.
MACRO_STEP_COST = {"all": 3, "exists": 4, "exists_one": 2, "map": 12, "filter": 13}
MACRO_BASE_COST = {"all": 1, "exists": 1, "exists_one": 2, "map": 11, "filter": 11}
MACROS = frozenset(MACRO_STEP_COST)
BIND_COST = LIST_CREATE_COST   # cel.bind's empty iteration range, as cel-go counts it
_PARSERS = {"quantity", "isQuantity", "semver", "isSemver"}
_RESULT_KIND = {"quantity": "quantity", "semver": "semver", "isQuantity": "bool", "isSemver": "bool",
                "compareTo": "int", "isGreaterThan": "bool", "isLessThan": "bool", "sign": "int",
                "isInteger": "bool", "asInteger": "int", "asApproximateFloat": "double", "add": "quantity",
                "sub": "quantity", "major": "int", "minor": "int", "patch": "int", "size": "int",
                "contains": "bool", "startsWith": "bool", "endsWith": "bool", "matches": "bool",
                "int": "int", "uint": "int", "double": "double", "bool": "bool", "has": "bool"}
_COMPARISONS = {"relation_lt", "relation_le", "relation_gt", "relation_ge", "relation_eq", "relation_ne"}


def _literal(token: lark.Token) -> Est:
    text = str(token.value)
    if token.type in ("STRING_LIT", "MLSTRING_LIT", "BYTES_LIT"):
        # the quotes are not part of the value; escapes make the value shorter, never longer
        return _string(max(0, len(text) - 2))
    if token.type == "BOOL_LIT":
        return BOOL
    return Est(kind="int" if token.type in ("INT_LIT", "UINT_LIT") else "double")


class Estimator:
    """cel-go's worst-case cost of an expression, on celpy's parse tree. Recursive, so
    call it only on a tree `nesting` accepted."""

    def __init__(self) -> None:
        self.scope: dict[str, list[Est]] = {"device": [DEVICE]}

    def estimate(self, tree: ParseTree) -> Est:
        while len(tree.children) == 1 and isinstance(tree.children[0], lark.Tree) \
                and tree.data not in _ALWAYS_LEVEL and tree.data != "unary":
            tree = tree.children[0]
        handler = getattr(self, "_" + tree.data, None)
        if handler is None:
            return Est(cost=_add(*(self.estimate(c).cost for c in tree.children if isinstance(c, lark.Tree))),
                       size=UNKNOWN)
        result: Est = handler(tree)
        return result

    def _sub(self, tree: object) -> Est:
        return self.estimate(tree) if isinstance(tree, lark.Tree) else Est()

    # ternary, logic, operators ---------------------------------------------------------
    def _expr(self, tree: ParseTree) -> Est:
        cond, yes, no = (self._sub(c) for c in tree.children)
        both = _union(yes, no)
        return both.costing(_add(cond.cost, max(yes.cost, no.cost)))

    def _logical(self, tree: ParseTree) -> Est:
        left, right = (self._sub(c) for c in tree.children)
        return BOOL.costing(_add(left.cost, right.cost))

    _conditionalor = _conditionaland = _logical

    def _relation(self, tree: ParseTree) -> Est:
        op_tree, right_tree = tree.children
        assert isinstance(op_tree, lark.Tree)
        left, right = self._sub(op_tree.children[0]), self._sub(right_tree)
        if op_tree.data == "relation_in":
            call = _mul(right.size, 1)
        elif op_tree.data in _COMPARISONS:
            smallest = min(left.size, right.size)
            call = max(1 if smallest else 0, _factor(smallest, STRING_FACTOR))
        else:
            call = CALL_COST
        return BOOL.costing(_add(left.cost, right.cost, call))

    def _addition(self, tree: ParseTree) -> Est:
        op_tree, right_tree = tree.children
        assert isinstance(op_tree, lark.Tree)
        left, right = self._sub(op_tree.children[0]), self._sub(right_tree)
        if op_tree.data == "addition_add" and (left.kind in ("string", "bytes", "list", "any")
                                                or right.kind in ("string", "bytes", "list", "any")):
            size = _add(left.size, right.size)
            kind = left.kind if left.kind != "any" else right.kind
            elem = _union(left.elem, right.elem) if left.elem and right.elem else None
            return Est(cost=_add(left.cost, right.cost, max(1, _factor(size, STRING_FACTOR))),
                       size=size, kind=kind, elem=elem)
        return Est(cost=_add(left.cost, right.cost, CALL_COST), kind=left.kind)

    def _multiplication(self, tree: ParseTree) -> Est:
        op_tree, right_tree = tree.children
        assert isinstance(op_tree, lark.Tree)
        left, right = self._sub(op_tree.children[0]), self._sub(right_tree)
        return Est(cost=_add(left.cost, right.cost, CALL_COST), kind=left.kind)

    def _unary(self, tree: ParseTree) -> Est:
        if len(tree.children) == 1:
            return self._sub(tree.children[0])
        operand = self._sub(tree.children[1])
        return Est(cost=_add(operand.cost, CALL_COST), kind=operand.kind)

    # members ---------------------------------------------------------------------------
    def _member_dot(self, tree: ParseTree) -> Est:
        target = self._sub(tree.children[0])
        name = str(tree.children[1])
        if target.fields:
            value = target.fields.get(name, ANY)
        elif target.kind == "map" and target.elem is not None:
            value = target.elem
        else:
            value = ANY
        return value.costing(_add(target.cost, SELECT_COST))

    def _member_index(self, tree: ParseTree) -> Est:
        target, index = self._sub(tree.children[0]), self._sub(tree.children[1])
        value = ANY if target.fields and index.kind == "string" else target.elem or ANY
        return value.costing(_add(target.cost, index.cost, CALL_COST))

    def _member_object(self, tree: ParseTree) -> Est:
        parts = [self._sub(c) for c in tree.children[1:]]
        return Est(cost=_add(40, *(p.cost for p in parts)), size=UNKNOWN)

    def _member_dot_arg(self, tree: ParseTree) -> Est:
        receiver_tree, name_token = tree.children[0], tree.children[1]
        args = children(tree.children[2]) if len(tree.children) > 2 else []
        name = str(name_token)
        if name == "bind" and simple_ident(receiver_tree) == "cel" and len(args) == 3:
            return self._bind(args)
        receiver = self._sub(receiver_tree)
        if name in MACROS and len(args) == 2:
            return self._macro(name, receiver, args)
        return self._call(name, receiver, [self._sub(a) for a in args])

    def _bind(self, args: Sequence[object]) -> Est:
        var, init_tree, body_tree = args
        init = self._sub(init_tree)
        with self._bound(simple_ident(var), init.costing(0)):
            body = self._sub(body_tree)
        return body.costing(_add(BIND_COST, init.cost, body.cost))

    def _macro(self, name: str, receiver: Est, args: Sequence[object]) -> Est:
        items = receiver.size
        # ranging over a map binds its keys, over a list its elements
        var = (receiver.key if receiver.kind == "map" else receiver.elem) or ANY
        with self._bound(simple_ident(args[0]), var.costing(0)):
            body = self._sub(args[1])
        cost = _add(receiver.cost, MACRO_BASE_COST[name], _mul(items, _add(MACRO_STEP_COST[name], body.cost)))
        if name == "map":
            return Est(cost=cost, size=items, kind="list", elem=body.costing(0))
        if name == "filter":
            return Est(cost=cost, size=items, kind="list", elem=receiver.elem)
        return BOOL.costing(cost)

    def _call(self, name: str, receiver: Est | None, args: list[Est]) -> Est:
        operands = ([receiver] if receiver is not None else []) + args
        spent = _add(*(o.cost for o in operands))
        kind = _RESULT_KIND.get(name, "any")
        if name in _PARSERS and operands:
            call = _add(CALL_COST, _factor(operands[0].size, STRING_FACTOR))
        elif name in ("startsWith", "endsWith") and len(operands) == 2:
            call = max(1, _factor(operands[1].size, STRING_FACTOR))
        elif name == "contains" and len(operands) == 2:
            call = max(1, _mul(_factor(operands[0].size, STRING_FACTOR), _factor(operands[1].size, STRING_FACTOR)))
        elif name == "matches" and len(operands) == 2:
            call = max(1, _mul(_factor(_add(operands[0].size, 1), STRING_FACTOR),
                               _factor(operands[1].size, REGEX_FACTOR)))
        else:
            call = CALL_COST
        size = UNKNOWN if kind in ("any", "string", "bytes") else 1
        if name in ("dyn",) and operands:
            return operands[0].costing(_add(spent, CALL_COST))
        return Est(cost=_add(spent, call), size=size, kind=kind)

    # primaries -------------------------------------------------------------------------
    def _primary(self, tree: ParseTree) -> Est:
        return self._sub(tree.children[0])

    def _literal(self, tree: ParseTree) -> Est:
        token = tree.children[0]
        return _literal(token) if isinstance(token, lark.Token) else Est()

    def _ident(self, tree: ParseTree) -> Est:
        name = str(tree.children[0])
        bound = self.scope.get(name)
        return (bound[-1] if bound else ANY).costing(SELECT_COST)

    _dot_ident = _ident

    def _paren_expr(self, tree: ParseTree) -> Est:
        return self._sub(tree.children[0])

    def _ident_arg(self, tree: ParseTree) -> Est:
        name = str(tree.children[0])
        args = children(tree.children[1]) if len(tree.children) > 1 else []
        return self._call(name, None, [self._sub(a) for a in args])

    _dot_ident_arg = _ident_arg

    def _list_lit(self, tree: ParseTree) -> Est:
        items = [self._sub(c) for c in children(tree.children[0])] if tree.children else []
        elem = items[0] if items else None
        for item in items[1:]:
            elem = _union(elem, item) if elem else item
        return Est(cost=_add(LIST_CREATE_COST, *(i.cost for i in items)), size=len(items), kind="list",
                   elem=elem.costing(0) if elem else None)

    def _map_lit(self, tree: ParseTree) -> Est:
        parts = [self._sub(c) for c in children(tree.children[0])] if tree.children else []
        keys, values = parts[0::2], parts[1::2]
        key = keys[0] if keys else None
        value = values[0] if values else None
        for k, v in zip(keys[1:], values[1:], strict=True):
            key, value = _union(key, k) if key else k, _union(value, v) if value else v
        return Est(cost=_add(MAP_CREATE_COST, *(p.cost for p in parts)), size=len(keys), kind="map",
                   key=key.costing(0) if key else None, elem=value.costing(0) if value else None)

    def _bound(self, name: str | None, value: Est) -> _Binding:
        return _Binding(self.scope, name, value)


class _Binding:
    def __init__(self, scope: dict[str, list[Est]], name: str | None, value: Est) -> None:
        self.scope, self.name, self.value = scope, name, value

    def __enter__(self) -> None:
        if self.name is not None:
            self.scope.setdefault(self.name, []).append(self.value)

    def __exit__(self, *exc: object) -> None:
        if self.name is not None:
            self.scope[self.name].pop()


def estimated_cost(tree: ParseTree) -> int:
    """The worst-case cost of evaluating `tree` on any device the DRA API allows."""
    return Estimator().estimate(tree).cost
