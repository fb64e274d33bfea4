"""SIGTERM and SIGHUP stop a test run the way Ctrl-C does. pytest's default for them is to
die at once, skipping every fixture's teardown; the sim fixtures start control planes in
their own sessions (so a Ctrl-C at the terminal reaches only pytest), which then outlive the
run with nothing to stop them. As a KeyboardInterrupt, pytest tears every fixture down
before it exits (tests/conftest.py installs this; tests/unit/test_signals.py checks it).

Under pytest-xdist (`make test` runs `-n N`) the fixtures live in the workers, not in the
controller the signal reaches, and xdist's own shutdown gives a worker 15 s before it exits it
(`os._exit`, no teardown left). So the controller forwards the signal to every worker (each
writes its pid into the run's directory at start), and before xdist shuts them down it waits,
up to WORKER_TEARDOWN_S, for every worker to say it has finished its teardown (a `.done` file,
written at the worker's unconfigure) or to be gone. A second signal stops that wait."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

STOPPING_SIGNALS = (signal.SIGTERM, signal.SIGHUP)
# The longest a worker's teardown may take: sim fleets stop tier by tier, 10 s grace each.
WORKER_TEARDOWN_S = 300.0
RUN_DIR_KEY = "modelplane_run_dir"


def _interrupt(signum: int, _frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"{signal.Signals(signum).name}: stopping the test run")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie has finished: its parent (execnet) reaps it later
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state != "Z"


class Controller:
    """The process the user (or CI) signals: the plain pytest run, or xdist's controller."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self.signalled: dict[int, int] = {}  # worker pid -> signal sent to it
        self.stopping: int | None = None

    def workers(self) -> dict[str, int]:
        """Worker id -> pid, from the pid files the workers wrote."""
        pids = {}
        for f in self.run_dir.glob("*.pid"):
            with contextlib.suppress(OSError, ValueError):
                pids[f.stem] = int(f.read_text().strip())
        return pids

    def forward(self, signum: int) -> None:
        for pid in self.workers().values():
            if pid not in self.signalled and pid != os.getpid():
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signum)
                self.signalled[pid] = signum

    def handle(self, signum: int, frame: FrameType | None) -> None:
        if self.stopping is None:
            self.stopping = signum
            self.forward(signum)
        _interrupt(signum, frame)

    def left(self) -> list[str]:
        """Workers still tearing down: alive and without a `.done` file."""
        return sorted(w for w, pid in self.workers().items()
                      if not (self.run_dir / f"{w}.done").exists() and _alive(pid))

    def wait_for_workers(self, deadline_s: float = WORKER_TEARDOWN_S) -> list[str]:
        """Forward the stopping signal to workers started since, and wait for all to finish."""
        deadline = time.monotonic() + deadline_s
        said = False
        while left := self.left():
            if self.stopping is not None:
                self.forward(self.stopping)
            if not said:
                print(f"\nmodelplane: waiting up to {deadline_s:.0f} s for xdist workers {', '.join(left)} "
                      "to tear their fixtures down", file=sys.stderr, flush=True)
                said = True
            if time.monotonic() > deadline:
                return left
            time.sleep(0.2)
        return []


def pytest_configure(config: pytest.Config) -> None:
    workerinput: dict[str, Any] | None = getattr(config, "workerinput", None)
    if workerinput is not None:  # an xdist worker: the controller forwards the signals
        if RUN_DIR_KEY in workerinput:
            run_dir = Path(workerinput[RUN_DIR_KEY])
            worker = str(workerinput.get("workerid", os.getpid()))
            with contextlib.suppress(OSError):
                (run_dir / f"{worker}.pid").write_text(str(os.getpid()))
            config.stash[_worker_key] = run_dir / f"{worker}.done"
        for sig in STOPPING_SIGNALS:
            signal.signal(sig, _interrupt)
        return
    controller = Controller(Path(tempfile.mkdtemp(prefix="modelplane-pytest-")))
    config.stash[_controller_key] = controller
    for sig in STOPPING_SIGNALS:
        signal.signal(sig, controller.handle)


_controller_key = pytest.StashKey[Controller]()
_worker_key = pytest.StashKey[Path]()


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """xdist (controller): tell each worker where to write its pid and its `.done`."""
    controller = node.config.stash.get(_controller_key, None)
    if controller is not None:
        node.workerinput[RUN_DIR_KEY] = str(controller.run_dir)


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Before xdist shuts its workers down (its own sessionfinish), let an interrupted run's
    workers finish their teardown."""
    controller = session.config.stash.get(_controller_key, None)
    if controller is None or not controller.workers():
        return
    if controller.stopping is None and exitstatus != pytest.ExitCode.INTERRUPTED:
        return
    try:
        left = controller.wait_for_workers()
    except KeyboardInterrupt:
        left = controller.left()
    if left:
        print(f"modelplane: xdist workers {', '.join(left)} did not finish their teardown; "
              "their processes may survive (pgrep -af 'kube-apiserver|etcd |kwok|traefik')",
              file=sys.stderr, flush=True)


def pytest_unconfigure(config: pytest.Config) -> None:
    done = config.stash.get(_worker_key, None)
    if done is not None:
        with contextlib.suppress(OSError):
            done.write_text("done")
    controller = config.stash.get(_controller_key, None)
    if controller is not None:
        shutil.rmtree(controller.run_dir, ignore_errors=True)
