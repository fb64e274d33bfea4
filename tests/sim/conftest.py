"""Fixtures for tests on simulated clusters: real etcd, kube-apiserver, kube-controller-manager,
kube-scheduler, kwok and LeaderWorkerSet processes started by the `sim` package.

When the tools are not built (scripts/bootstrap-tools --only sim), every test here is skipped
with a loud reason, repeated in red at the end of the run; MODELPLANE_REQUIRE_ENGINE=1 turns the
skip into a failure. Every fleet a test starts is stopped at teardown, whatever happened."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from modelplane.api import load_manifests
from sim import SimError, SimFleet, SimTools, find_tools
from tests.loud_skip import LoudSkips

REPO = Path(__file__).resolve().parents[2]


SKIPS = LoudSkips("SIMULATED CLUSTERS NOT AVAILABLE, sim test NOT RUN",
                  "tests/sim SKIPPED: no real control plane was exercised",
                  "Build the tools with scripts/bootstrap-tools --only sim (docs/sim.md).")


def pytest_terminal_summary(terminalreporter: Any) -> None:
    SKIPS.summary(terminalreporter)


@pytest.fixture(scope="session")
def sim_tools() -> SimTools:
    try:
        return find_tools()
    except SimError as exc:
        SKIPS.skip(str(exc))


def processes_mentioning(text: str) -> list[int]:
    """Pids of live (non-zombie) processes whose command line mentions `text`, e.g. a state dir."""
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if text in cmdline and state != "Z":
            pids.append(int(proc.name))
    return pids


@pytest.fixture
def start_fleet(sim_tools: SimTools, tmp_path: Path) -> Iterator[Callable[..., tuple[SimFleet, dict[str, Path]]]]:
    """start_fleet(manifests, **options) -> (SimFleet, {cluster: kubeconfig}); stopped at teardown."""
    started: list[SimFleet] = []

    def start(manifests: str | Path, **options: Any) -> tuple[SimFleet, dict[str, Path]]:
        fleet = load_manifests(REPO / manifests if not Path(manifests).is_absolute() else manifests)
        sim = SimFleet(tmp_path / f"state-{len(started)}", tools=sim_tools, **options)
        started.append(sim)
        return sim, sim.up(fleet, source=str(manifests))

    yield start
    for sim in started:
        if sim.state_file.exists():
            sim.down()
        assert not processes_mentioning(str(sim.state_dir)), f"processes of {sim.state_dir} survived teardown"
