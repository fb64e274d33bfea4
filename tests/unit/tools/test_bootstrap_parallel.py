"""scripts/bootstrap-tools builds the engine and sim groups at the same time when both have
something to build, the sim tools then with beside_provider_flags() (one package at a time, never
beside the provider's core/v1 compile: scripts/go-compile-limits --beside); one after the other,
with no extra flags, when either group is already built (and the sim tools still to build once
the engine group is done). The script is loaded as a module and its two group builders replaced
by stand-ins that meet at a barrier: a serial build breaks it."""

from __future__ import annotations

import importlib.machinery
import sys
import threading
import types
from pathlib import Path
from typing import Any

import pytest

SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "bootstrap-tools"


def _script(cache: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("MODELPLANE_TOOLS_CACHE", str(cache))
    loader = importlib.machinery.SourceFileLoader("bootstrap_tools_under_test", str(SCRIPT))
    module = types.ModuleType(loader.name)
    module.__file__ = str(SCRIPT)
    monkeypatch.setitem(sys.modules, loader.name, module)   # dataclasses look their module up
    loader.exec_module(module)
    return module


@pytest.mark.parametrize(("engine_built", "sim_built", "together"), [
    pytest.param(False, False, True, id="both to build: at the same time, the sim tools beside the provider"),
    pytest.param(True, False, False, id="the engine cached: the sim group alone, no extra flags"),
    pytest.param(False, True, False, id="the sim cached: the engine group alone"),
])
def test_the_groups_build_at_the_same_time_only_when_both_have_work(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, engine_built: bool, sim_built: bool,
        together: bool) -> None:
    bt = _script(tmp_path / "cache", monkeypatch)
    meet = threading.Barrier(2, timeout=10 if together else 0.2)
    seen: dict[str, Any] = {}

    def engine(c: Any, gov: str, probe_s: float) -> list[str]:
        seen["engine"] = _met(meet)
        return ["engine-missing"]

    def sim(c: Any, gov: str, probe_s: float, flags: list[str]) -> list[str]:
        seen["sim"], seen["flags"] = _met(meet), list(flags)
        seen["live_flags"] = flags          # what the sim steps still to build read when they start
        return ["sim-missing"]

    monkeypatch.setattr(bt, "build_engine", engine)
    monkeypatch.setattr(bt, "build_sim", sim)
    monkeypatch.setattr(bt, "engine_steps", lambda *a: [bt.Step("pulumi", lambda: {}, [], {"built": engine_built})])
    monkeypatch.setattr(bt, "sim_steps", lambda *a: [bt.Step("etcd", lambda: {}, [], {"built": sim_built})])
    monkeypatch.setattr(bt, "is_built", lambda step, key: step.want["built"])
    choice = bt.Choice(pulumi="3.274.1", provider=("4.32.0", "v4.0.0-x", "1.36.1"))

    missing = bt.build(choice, {"engine", "sim"}, "go1.x", 0.0)

    assert sorted(missing) == ["engine-missing", "sim-missing"]
    assert seen["engine"] is together and seen["sim"] is together
    if together:
        assert seen["flags"][:2] == ["-p", "1"] and "--beside" in seen["flags"][3]
        assert str(bt.compile_lock()) in seen["flags"][3]
        assert seen["live_flags"] == []     # the engine group done: the rest builds as it does alone
    else:
        assert seen["flags"] == []


def _met(barrier: threading.Barrier) -> bool:
    """True when the other group reached the barrier meanwhile (they ran at the same time)."""
    try:
        barrier.wait()
        return True
    except threading.BrokenBarrierError:
        return False


def test_the_provider_and_the_sim_tools_share_one_compile_lock(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                               ) -> None:
    bt = _script(tmp_path / "cache", monkeypatch)
    assert bt.compile_lock() == tmp_path / "cache" / "compile-limits.lock"
    assert f"'{bt.compile_lock()}'" in bt.beside_provider_flags()[3]
    assert "limits = f\"'{COMPILE_LIMITS}' '{compile_lock()}'\"" in SCRIPT.read_text()   # the provider's
