"""`demo` under signals, hostile manifests and bad files (issue 9 items 1a, 3 and 7).

The demo runs as a user runs it: `python -m modelplane demo` in a subprocess, its
temporary directory under this test's own TMPDIR, so concurrent runs never mix.
"""
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import types
from pathlib import Path

import pytest

from modelplane.commands import demo
from modelplane.routing import Endpoint

ROOT = Path(__file__).resolve().parents[2]


def _stat(pid: int) -> list[str] | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None


def _alive(pid: int) -> bool:
    fields = _stat(pid)
    return fields is not None and fields[0] != "Z"


def _children(pid: int) -> set[int]:
    out = set()
    for entry in filter(str.isdigit, os.listdir("/proc")):
        fields = _stat(int(entry))
        if fields is not None and int(fields[1]) == pid:
            out.add(int(entry))
    return out


def _listening_ports(pids: set[int]) -> set[int]:
    inodes = set()
    for pid in pids:
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
        except OSError:
            continue
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            f = line.split()
            if f[3] == "0A" and f[9] in inodes:  # LISTEN
                ports.add(int(f[1].rsplit(":", 1)[1], 16))
    return ports


def _refused(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return False
    except OSError:
        return True


class Demo:
    """`python -m modelplane demo` in the background; lines of stdout as they come."""

    def __init__(self, tmp_path: Path, *args: str):
        self.tmp = tmp_path / "tmp"
        self.tmp.mkdir()
        env = dict(os.environ, TMPDIR=str(self.tmp), PYTHONPATH=str(ROOT))
        self.proc = subprocess.Popen([sys.executable, "-m", "modelplane", "demo", *args], cwd=ROOT, env=env,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line)

    def wait_for(self, text: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(text in line for line in self.lines):
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        raise AssertionError(f"demo never printed {text!r}: {''.join(self.lines)}{self.proc.stderr.read()}")

    def leftovers(self) -> list[Path]:
        return list(self.tmp.glob("modelplane-local-*"))


def _wait(check, timeout: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.05)
    return check()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT], ids=lambda s: s.name)
def test_demo_stops_every_process_port_and_directory_on_a_termination_signal(traefik, tmp_path, sig):
    demo = Demo(tmp_path, "examples/kind", "-n", "1000000")
    try:
        demo.wait_for("weights:")
        children = _children(demo.proc.pid)
        ports = _listening_ports(children)
        assert len(children) >= 4 and len(ports) >= 4 and demo.leftovers()  # engines, Traefiks, watchdog
        demo.proc.send_signal(sig)
        demo.proc.wait(30)
        err = demo.proc.stderr.read()
    finally:
        if demo.proc.poll() is None:
            demo.proc.kill()
    assert demo.proc.returncode == 128 + sig
    assert err.strip() == f"demo: interrupted by {sig.name}; stopped every engine and gateway the demo started"
    assert not [p for p in children if _alive(p)]
    assert all(_refused(p) for p in ports)
    assert demo.leftovers() == []


def test_demo_killed_outright_still_leaves_no_process_port_or_directory(traefik, tmp_path):
    """SIGKILL cannot be handled: the watchdog leading the children's group cleans up."""
    demo = Demo(tmp_path, "examples/kind", "-n", "1000000")
    try:
        demo.wait_for("weights:")
        children = _children(demo.proc.pid)
        ports = _listening_ports(children)
        demo.proc.kill()
        demo.proc.wait(10)
    finally:
        if demo.proc.poll() is None:
            demo.proc.kill()
    assert _wait(lambda: not [p for p in children if _alive(p)]), [p for p in children if _alive(p)]
    assert all(_refused(p) for p in ports)
    assert _wait(lambda: demo.leftovers() == [])


def test_demo_never_prints_an_endpoint_urls_user_info(tmp_path):
    """The loader refuses a URL with user-info (h2's secrets rule), without quoting it."""
    manifests = tmp_path / "canary"
    shutil.copytree(ROOT / "examples" / "canary", manifests)
    models = manifests / "models.yaml"
    models.write_text(models.read_text().replace("origin: https://api.together.xyz",
                                                 "origin: https://bob:PASSWORD@api.together.xyz"))
    r = subprocess.run([sys.executable, "-m", "modelplane", "demo", str(manifests), "-n", "4"], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2
    assert "spec.origin" in r.stderr and "user-info" in r.stderr
    assert "PASSWORD" not in r.stdout + r.stderr and "bob" not in r.stdout + r.stderr


def test_demo_prints_a_stand_in_endpoint_url_without_user_info(capsys):
    """Behind the loader's rule, the line naming a stand-in redacts the URL on its own."""
    class Local:
        secrets: dict = {}

        def start_engine(self, *args):
            return types.SimpleNamespace(url="http://127.0.0.1:1")

    ep = Endpoint("ml-team", "together", {}, url="https://bob:PASSWORD@api.together.xyz", external=True)
    assert demo._stand_in(Local(), ep).url == "http://127.0.0.1:1"
    out = capsys.readouterr().out
    assert "external endpoint ml-team/together (https://api.together.xyz)" in out and "PASSWORD" not in out


@pytest.mark.parametrize("content", [b"\xff\xfe not utf-8: \x80\x81", b"a: [" * 2000],
                         ids=["not-utf-8", "deep-nesting"])
def test_demo_reports_a_file_it_cannot_load_without_a_traceback(tmp_path, content):
    (tmp_path / "bad.yaml").write_bytes(content)
    r = subprocess.run([sys.executable, "-m", "modelplane", "demo", str(tmp_path)], cwd=ROOT,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    assert r.stderr.startswith("demo: ") and "Traceback" not in r.stderr
    assert r.stdout == ""


def test_demo_reports_a_5000_digit_quantity_as_a_manifest_error(tmp_path):
    manifests = tmp_path / "kind"
    shutil.copytree(ROOT / "examples" / "kind", manifests)
    platform = manifests / "platform.yaml"
    platform.write_text(platform.read_text().replace("value: 80Gi", f"value: {'9' * 5000}Gi"))
    r = subprocess.run([sys.executable, "-m", "modelplane", "demo", str(manifests)], cwd=ROOT,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    assert "Traceback" not in r.stderr
    assert re.search(r"platform\.yaml.*spec\.devices\[0\]\.capacity\.memory", r.stderr)
