"""Small readers of celpy's lark parse trees, shared by the evaluator, the plan-time checks and
the key finder, and the cost estimator."""

from __future__ import annotations

from typing import Any, TypeAlias

import lark

ParseTree = lark.Tree[lark.Token]

# A child of a celpy parse tree: a subtree or a token (lark's `Branch[Token]`). celpy's grammar
# fixes which at each position (a call's arguments and a macro's variable and body are trees),
# and the readers index them as such without re-checking what the parser already decided.
Node: TypeAlias = Any


def children(node: object) -> list[Node]:
    return list(node.children) if isinstance(node, lark.Tree) else []


def simple_ident(tree: object) -> lark.Token | None:
    """The identifier token if `tree` is nothing but a bare name."""
    while isinstance(tree, lark.Tree) and len(tree.children) == 1:
        if tree.data == "ident":
            child = tree.children[0]
            return child if isinstance(child, lark.Token) else None
        tree = tree.children[0]
    return None


def ident_name(tree: object) -> str:
    """The bound variable of a comprehension or cel.bind (checked at compile)."""
    token = simple_ident(tree)
    return str(token) if token is not None else ""


def subtree(node: object) -> ParseTree:
    if not isinstance(node, lark.Tree):
        raise TypeError(f"expected a tree, got {type(node).__name__}")
    return node


def token(node: object) -> lark.Token:
    if not isinstance(node, lark.Token):
        raise TypeError(f"expected a token, got {type(node).__name__}")
    return node


def is_constant(tree: ParseTree) -> bool:
    dynamic = {"ident", "ident_arg", "member_dot", "member_dot_arg", "dot_ident", "dot_ident_arg"}
    return not any(node.data in dynamic for node in tree.iter_subtrees())
