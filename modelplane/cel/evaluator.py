"""celpy's interpreter plus what Kubernetes adds: the ``cel.bind`` macro, comprehensions that stop
where cel-go's do, and cel-go's runtime cost charged per node. `ENV` is the one environment
every module of the package compiles with (its parser from the user's cache: .grammar)."""

from __future__ import annotations

import celpy
import celpy.celtypes as ct
from celpy.evaluation import CELEvalError, Context, Evaluator

from .cost import (
    BIND_COST,
    CALL_COST,
    LIST_CREATE_COST,
    MACRO_BASE_COST,
    MACRO_STEP_COST,
    MACROS,
    MAP_CREATE_COST,
    SELECT_COST,
    charge,
)
from .grammar import environment
from .library import CelValue
from .tree import Node, ParseTree, children, ident_name, simple_ident, subtree


def _bind_parts(tree: ParseTree) -> tuple[Node, ...] | None:
    """The (variable, init, body) of a `cel.bind(...)` call, else None."""
    receiver = tree.children[0]
    if str(tree.children[1]) != "bind" or len(tree.children) != 3:
        return None
    ident = simple_ident(receiver)
    if ident is None or str(ident) != "cel":
        return None
    return tuple(children(tree.children[2]))


def _eval_error(message: str, tree: ParseTree) -> CELEvalError:
    return CELEvalError(message, TypeError, (message,), tree=tree)


class _Evaluator(Evaluator):
    """celpy's interpreter plus the `cel.bind` macro Kubernetes provides, comprehensions
    that stop where cel-go's do (`all` at the first false, `exists` at the first true), and
    cel-go's runtime cost charged to the evaluation's meter (modelplane.cel.cost): nodes
    here, functions in `FUNCTIONS`."""

    def sub_evaluator(self, ast: ParseTree) -> Evaluator:
        return _Evaluator(ast, activation=self.activation)

    def primary(self, tree: ParseTree) -> CelValue:
        kind = getattr(tree.children[0], "data", None)
        if kind in ("ident", "dot_ident"):
            charge(SELECT_COST)
        elif kind == "list_lit":
            charge(LIST_CREATE_COST)
        elif kind == "map_lit":
            charge(MAP_CREATE_COST)
        elif kind == "ident_arg" and str(children(tree.children[0])[0]) in ("has", "dyn"):
            charge(CALL_COST)   # every other call is charged by its function in FUNCTIONS
        return super().primary(tree)

    def member_dot(self, tree: ParseTree) -> CelValue:
        charge(SELECT_COST)
        return super().member_dot(tree)

    def member_dot_arg(self, tree: ParseTree) -> CelValue:
        parts = _bind_parts(tree)
        if parts is not None:
            return self._bind(*parts)
        name = str(tree.children[1])
        if name in MACROS:
            return self._comprehension(name, tree)
        return super().member_dot_arg(tree)

    def _bind(self, var_tree: ParseTree, init_tree: ParseTree, body_tree: ParseTree) -> CelValue:
        charge(BIND_COST)
        init = self.visit(init_tree)
        if isinstance(init, CELEvalError):
            return init
        try:
            return self.sub_evaluator(body_tree).evaluate({ident_name(var_tree): init})
        except CELEvalError as error:
            return error

    def _comprehension(self, name: str, tree: ParseTree) -> CelValue:
        target = self.visit(subtree(tree.children[0]))
        if isinstance(target, CELEvalError):
            return target
        if not isinstance(target, (ct.ListType, ct.MapType)):
            return _eval_error(f"no such overload: {type(target).__name__}.{name}()", tree)
        var_tree, body_tree = children(tree.children[2])
        var = ident_name(var_tree)
        body = self.sub_evaluator(body_tree)
        step = MACRO_STEP_COST[name]
        charge(MACRO_BASE_COST[name])

        def each(item: CelValue) -> CelValue:
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
    def evaluate(self, context: Context) -> CelValue:
        return _Evaluator(ast=self.ast, activation=self.new_activation()).evaluate(context)


ENV = environment(_Runner)   # the parser from the user's cache (.grammar)
