"""The registry of checks: name, default level, one-line description, function."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from .context import CheckContext
from .findings import Finding


@dataclass(frozen=True)
class Check:
    name: str
    level: str
    description: str
    run: Callable[[CheckContext], Iterable[Finding]]
    # Checks that only make sense on a placed fleet; without a scheduler result they
    # report nothing rather than guess.
    needs_placement: bool = False


CHECKS: dict[str, Check] = {}


CheckFunction = Callable[[CheckContext], Iterable[Finding]]


def register(name: str, level: str, description: str, *, needs_placement: bool = False
             ) -> Callable[[CheckFunction], CheckFunction]:
    def wrap(fn: CheckFunction) -> CheckFunction:
        CHECKS[name] = Check(name, level, description, fn, needs_placement)
        return fn
    return wrap
