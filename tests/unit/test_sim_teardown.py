"""The sim tests' teardown destroys a stack only when its clusters stay up after it
(tests/sim/conftest.py, StackFactory and FLEET_SCOPE): a destroy before `sim down` was ~15 s of
every sim test for objects that go with the fleet anyway, but a module's fleet that outlives a
test's stack must not keep that stack's objects for the next test."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.sim import conftest
from tests.sim.conftest import FLEET_SCOPE, StackFactory


class Removed:
    def __init__(self) -> None:
        self.calls: list[tuple[str, bool]] = []

    def __call__(self, stack: Any, *, destroy: bool = True) -> None:
        self.calls.append((stack.name, destroy))


class Stack:
    def __init__(self, name: str, state_dir: Path) -> None:
        self.name, self.state_dir = name, state_dir


@pytest.mark.parametrize(("stack_scope", "fleet_scope", "destroyed"), [
    pytest.param("function", "function", False, id="a test's stack on the test's own fleet: removed only"),
    pytest.param("module", "module", False, id="a module's stack on the module's fleet: removed only"),
    pytest.param("function", "module", True, id="a test's stack on a module's fleet: destroyed first"),
    pytest.param("function", None, True, id="a fleet no fixture stops (started by hand): destroyed first"),
])
def test_a_stack_is_destroyed_at_teardown_only_when_its_fleet_stays_up(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, stack_scope: str, fleet_scope: str | None,
        destroyed: bool) -> None:
    removed = Removed()
    monkeypatch.setattr(conftest, "remove_sim_stack", removed)
    monkeypatch.setattr(conftest, "FLEET_SCOPE", dict(FLEET_SCOPE))
    state = tmp_path / "state-0"
    if fleet_scope is not None:
        conftest.FLEET_SCOPE[state] = fleet_scope
    factory = StackFactory({}, stack_scope)
    factory.made.append(Stack("simtest-1", state))   # type: ignore[arg-type] - only name and state_dir are read
    factory.close()
    assert removed.calls == [("simtest-1", destroyed)]
