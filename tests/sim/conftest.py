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

from modelplane.api import Fleet, load_manifests
from sim import SimError, SimFleet, SimTools, find_tools
from sim.fleet import port_listening
from tests.engine.conftest import PROGRAM_FILES
from tests.engine.conftest import _engine_environment as engine_environment
from tests.loud_skip import LoudSkips
from tests.sim.stack import SimStack, make_sim_stack, remove_sim_stack, remove_stale_stack_files

REPO = Path(__file__).resolve().parents[2]


SKIPS = LoudSkips("SIMULATED CLUSTERS NOT AVAILABLE, sim test NOT RUN",
                  "tests/sim SKIPPED: no real control plane was exercised",
                  "Build the tools with scripts/bootstrap-tools --only sim (docs/sim.md).")
STACK_SKIPS = LoudSkips("REAL PULUMI ENGINE NOT AVAILABLE, sim stack test NOT RUN",
                        "tests/sim stack tests SKIPPED: `pulumi up -s sim` was not exercised",
                        "Build the tools with scripts/bootstrap-tools (docs/engine-tools.md).")


def pytest_terminal_summary(terminalreporter: Any) -> None:
    SKIPS.summary(terminalreporter)
    STACK_SKIPS.summary(terminalreporter)


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


# The fleets the fixtures below started in this process, running or not: a test (or a module's
# fixtures) that starts a second while one is up fails, naming both. One fleet at a time is what
# keeps the run's peak memory down (docs/ci.md#memory): two module fleets of one module, or a
# module's fleet plus a test's own, were the run's peak (5-6 API servers, 2.8 GB).
FLEETS: list[SimFleet] = []


def up_alone(sim: SimFleet, fleet: Fleet, source: str) -> dict[str, Path]:
    running = [str(other.state_dir) for other in FLEETS if other.state_file.exists()]
    if running:
        pytest.fail(f"a second sim fleet ({source}) while {', '.join(running)} is up: one fleet at a time "
                    "(docs/ci.md#memory); put the tests that need this one in a module of their own", pytrace=False)
    FLEETS.append(sim)
    return sim.up(fleet, source=source)


@pytest.fixture
def start_fleet(sim_tools: SimTools, tmp_path: Path) -> Iterator[Callable[..., tuple[SimFleet, dict[str, Path]]]]:
    """start_fleet(manifests, **options) -> (SimFleet, {cluster: kubeconfig}); stopped at teardown."""
    started: list[SimFleet] = []

    def start(manifests: str | Path, **options: Any) -> tuple[SimFleet, dict[str, Path]]:
        fleet = load_manifests(REPO / manifests if not Path(manifests).is_absolute() else manifests)
        sim = SimFleet(tmp_path / f"state-{len(started)}", tools=sim_tools, **options)
        started.append(sim)
        FLEET_SCOPE[sim.state_dir] = "function"
        return sim, up_alone(sim, fleet, str(manifests))

    try:
        yield start
    finally:
        for sim in started:
            FLEET_SCOPE.pop(sim.state_dir, None)
            stop_and_check(sim)


def stop_and_check(sim: SimFleet) -> None:
    """`sim down`, then no process of the fleet and no port it used is left."""
    ports = [port for row in sim.status() for port in row.ports.values()]
    if sim.state_file.exists():
        sim.down()
    assert not processes_mentioning(str(sim.state_dir)), f"processes of {sim.state_dir} survived `sim down`"
    assert [p for p in ports if port_listening(p)] == [], f"ports of {sim.state_dir} still listen"


@pytest.fixture(scope="module")
def module_fleet(sim_tools: SimTools, tmp_path_factory: pytest.TempPathFactory
                 ) -> Iterator[Callable[[str | Path], tuple[SimFleet, dict[str, Path]]]]:
    """module_fleet(manifests) -> (SimFleet, {cluster: kubeconfig}): simulated clusters shared by the
    tests of one module, stopped at its end (no process, no listening port left)."""
    started: list[SimFleet] = []

    def start(manifests: str | Path) -> tuple[SimFleet, dict[str, Path]]:
        path = REPO / manifests if not Path(manifests).is_absolute() else Path(manifests)
        sim = SimFleet(tmp_path_factory.mktemp("sim") / "state", tools=sim_tools)
        started.append(sim)
        FLEET_SCOPE[sim.state_dir] = "module"
        return sim, up_alone(sim, load_manifests(path), str(manifests))

    try:
        yield start
    finally:
        for sim in started:
            FLEET_SCOPE.pop(sim.state_dir, None)
            stop_and_check(sim)


@pytest.fixture(scope="session")
def sim_engine(sim_tools: SimTools, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """scripts/engine-env's environment with a temp `file://` backend and PULUMI_HOME for the sim
    stack tests; skipped loudly (a failure with MODELPLANE_REQUIRE_ENGINE=1) without the engine."""
    missing = [p for p in [*PROGRAM_FILES, "stacks/Pulumi.sim.yaml"] if not (REPO / p).exists()]
    if missing:
        STACK_SKIPS.skip(f"the Pulumi program is incomplete, missing: {', '.join(missing)}")
    env, why = engine_environment()
    if env is None:
        STACK_SKIPS.skip(why)
    assert env is not None
    work = tmp_path_factory.mktemp("sim-engine")
    for part in ("state", "home", "tmp"):
        (work / part).mkdir()
    remove_stale_stack_files()
    # TMPDIR of these tests' own: the wrapper's per-command directory goes under it, so a test can
    # see the Kubernetes provider's kubeconfig files are gone once a command is done.
    return {**env, "PULUMI_BACKEND_URL": f"file://{work / 'state'}", "PULUMI_HOME": str(work / "home"),
            "TMPDIR": str(work / "tmp"),
            "PULUMI_CONFIG_PASSPHRASE": env.get("PULUMI_CONFIG_PASSPHRASE") or "modelplane-sim-tests"}


# The scope ("function" or "module") of the fixture that stops each running fleet (by state dir)
# at its teardown. A stack torn down in the same scope as its fleet is removed without a destroy:
# its objects go with the fleet a moment later, and the destroy was ~15 s of each sim test (20 s
# and more under load; docs/ci.md). A fleet that outlives the stack (a module's fleet, a test's
# stack) still gets its destroy, so the next test starts on clusters without it.
FLEET_SCOPE: dict[Path, str] = {}


class StackFactory:
    """factory(manifests, state_dir, config=None) -> SimStack; close() removes them all, destroying
    first what a fleet that stays up would keep (FLEET_SCOPE)."""

    def __init__(self, env: dict[str, str], scope: str) -> None:
        self.env = env
        self.scope = scope
        self.made: list[SimStack] = []

    def __call__(self, manifests: Path, state_dir: Path, config: dict[str, Any] | None = None) -> SimStack:
        stack = make_sim_stack(self.env, manifests, state_dir, config)
        self.made.append(stack)
        return stack

    def close(self) -> None:
        for stack in self.made:
            remove_sim_stack(stack, destroy=FLEET_SCOPE.get(stack.state_dir) != self.scope)


@pytest.fixture
def sim_stack(sim_engine: dict[str, str]) -> Iterator[StackFactory]:
    """sim_stack(manifests, state_dir, config=None) -> SimStack (tests/sim/stack.py), removed at
    teardown whatever happened (destroyed first when its fleet stays up: StackFactory). Request
    it after the fleet fixture, so it is torn down first (while the simulated clusters still run)."""
    factory = StackFactory(sim_engine, "function")
    try:
        yield factory
    finally:
        factory.close()


@pytest.fixture(scope="module")
def module_sim_stack(sim_engine: dict[str, str]) -> Iterator[StackFactory]:
    """sim_stack for stacks shared by the tests of one module (request it after module_fleet)."""
    factory = StackFactory(sim_engine, "module")
    try:
        yield factory
    finally:
        factory.close()
