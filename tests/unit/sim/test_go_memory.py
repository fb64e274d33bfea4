"""The memory settings the sim gives its Go processes (sim/cluster.py, docs/ci.md#memory)."""

from __future__ import annotations

import pytest

from sim.cluster import GO_MEMORY, go_memory_env
from sim.process import STOP_TIERS


def test_every_process_of_a_cluster_gets_a_gc_target_and_a_soft_ceiling(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("GOGC", "GOMEMLIMIT", "MODELPLANE_SIM_GO_MEMORY"):
        monkeypatch.delenv(var, raising=False)
    names = {name for tier in STOP_TIERS for name in tier}
    assert set(GO_MEMORY) == names
    for name in names:
        env = go_memory_env(name)
        assert int(env["GOGC"]) <= 100
        assert env["GOMEMLIMIT"].endswith("MiB") and int(env["GOMEMLIMIT"][:-3]) >= 64


def test_a_setting_in_the_environment_wins_and_default_leaves_gos_own(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MODELPLANE_SIM_GO_MEMORY", raising=False)
    monkeypatch.setenv("GOGC", "200")
    assert go_memory_env("kube-apiserver") == {"GOMEMLIMIT": GO_MEMORY["kube-apiserver"]["GOMEMLIMIT"]}
    monkeypatch.setenv("MODELPLANE_SIM_GO_MEMORY", "default")
    assert go_memory_env("kube-apiserver") == {}
    assert go_memory_env("not-a-go-process") == {}
