"""How `make test` spreads the suite over pytest-xdist workers (`-n N --dist loadgroup`).

* Every module of the directories that start real processes (GROUPED_DIRS) is one xdist group:
  its tests run on one worker, in file order, so a module-scoped fixture (a sim fleet, an
  engine stack) is started once and shared, never once per worker.
* The slowest modules are handed out first (SLOW_MODULES, from `--durations` of a full run), so
  no worker starts a 10-minute module when the others are nearly done.
* Unit and property tests stay ungrouped: xdist hands them out one by one.
* A worker whose session has finished (no work left for it) exits then, not when the last
  worker is done (`pytest_testnodedown`): its heap, ~0.5 GB after the unit and engine tests, was
  a fifth of the run's memory peak while the sim group ran on the other worker (docs/ci.md).

The groups are computed from the node id by our own scheduler (GroupScheduling, xdist's
LoadGroupScheduling with its scope taken from the module path): with pytest 9.2, xdist 3.8's
loadgroup renames node ids through a field pytest no longer reads, so `xdist_group` marks alone
silently stop grouping (pytest-dev/pytest-xdist#1386). The marks are still added, for whoever
reads them (`-m xdist_group`, a fixed xdist).

The hooks are harmless without xdist (a plain `pytest` run only gets the order)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

# Directories whose modules start processes or stacks that a module shares between its tests.
GROUPED_DIRS = ("tests/sim", "tests/engine", "tests/integration", "tests/hostile", "tests/pulumi", "tests/policy")

# The sim modules: one group among them all (SIM_GROUP), so at most one sim fleet runs at a time
# whatever the worker count: a fleet is ~0.5 GB of Go processes (docs/ci.md), and two at once
# were what pushed the run's peak past 2.5 GB.
# MODELPLANE_SIM_GROUPS=module gives each sim module its own group again (to measure).
SIM_DIR = "tests/sim"
SIM_GROUP = "tests/sim"


def sim_one_group() -> bool:
    return os.environ.get("MODELPLANE_SIM_GROUPS", "one") != "module"

# Slowest first (seconds of a serial run on the 2-core CI machine, docs/ci.md); the rest keep
# their collection order after these.
SLOW_MODULES = (
    "tests/sim/test_observe_stack.py",
    "tests/sim/test_autoscale_stack.py",
    "tests/sim/test_stack.py",
    "tests/sim/test_stack_gotchas.py",
    "tests/engine/test_split_stacks.py",
    "tests/engine/test_render_stack.py",
)


def module_of(item: pytest.Item) -> str:
    """The item's file relative to the run's rootdir (the repository), with `/` separators."""
    path = Path(str(item.path))
    try:
        return path.resolve().relative_to(item.config.rootpath.resolve()).as_posix()
    except ValueError:
        return path.as_posix()


def group_of(module: str, sim_group: bool) -> str | None:
    """The xdist group of a module's tests, or None for tests handed out one by one."""
    if sim_group and module.startswith(SIM_DIR + "/"):
        return SIM_GROUP
    if any(module.startswith(d + "/") for d in GROUPED_DIRS):
        return module
    return None


def rank(module: str) -> int:
    return SLOW_MODULES.index(module) if module in SLOW_MODULES else len(SLOW_MODULES)


def scope_of(nodeid: str, sim_group: bool) -> str:
    """The xdist work unit of a node id (`path::name[params]`, perhaps with xdist's `@group`)."""
    return group_of(nodeid.split("::", 1)[0], sim_group) or nodeid


def order_and_group(items: list[pytest.Item], sim_group: bool) -> None:
    """Slowest modules first (a stable sort: tests keep their order within a module), and the
    xdist_group marks. In place, as pytest's collection hooks do."""
    modules = {id(item): module_of(item) for item in items}
    items.sort(key=lambda item: rank(modules[id(item)]))
    for item in items:
        group = group_of(modules[id(item)], sim_group)
        if group is not None and item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(group))


# tryfirst: xdist's worker renames each node id to `id@group` in its own modifyitems hook, which
# must see the marks.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    order_and_group(items, sim_one_group())


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`--dist loadgroup`: our groups (scope_of), xdist's scheduling of them."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadGroupScheduling

    sim_group = sim_one_group()

    class GroupScheduling(LoadGroupScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            return scope_of(nodeid, sim_group)

    return GroupScheduling(config, log)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object | None) -> None:
    """xdist (controller): end a worker's process as soon as its session has finished.

    xdist ends every worker together, at the run's end (`NodeManager.teardown_nodes`): one done
    early sits `[pytest-xdist idle]` holding its heap while another still runs the sim group.
    `gateway.exit()` is that same teardown, one worker at a time: it unregisters the gateway
    from its execnet group, which waits for the process at the run's end (`Group.terminate`
    joins unregistered gateways while any remain registered, hence not for the last one, whose
    teardown comes at once anyway). A worker that crashed or was interrupted is left to xdist."""
    workeroutput = getattr(node, "workeroutput", None)
    if error is not None or not isinstance(workeroutput, dict) or workeroutput.get("exitstatus") == 2:
        return
    if len(node.nodemanager.group) > 1:  # the execnet Group of the run's workers
        node.gateway.exit()
