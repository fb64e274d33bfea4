"""scripts/go-compile-limits, the `go build -toolexec` wrapper of the Kubernetes provider's build:
which compiles get a lower GOGC and the lock, and that everything else runs untouched; with
`--beside` (the sim tools' builds, run meanwhile), every compile and link waits while core/v1
compiles.

A stand-in `compile` prints the GOGC it was given and its arguments; the lock is probed with
flock(1), as the wrapper takes it."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

WRAPPER = Path(__file__).resolve().parents[3] / "scripts" / "go-compile-limits"
SDK = "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes"

needs_flock = pytest.mark.skipif(shutil.which("flock") is None, reason="flock(1) (util-linux) is not installed")


def _tool(tmp_path: Path, name: str, body: str = 'echo "GOGC=${GOGC:-unset} $*"') -> Path:
    tool = tmp_path / "tools" / name
    tool.parent.mkdir(exist_ok=True)
    tool.write_text(f"#!/bin/sh\n{body}\n")
    tool.chmod(0o755)
    return tool


def _run(tmp_path: Path, tool: Path, *args: str, path: str | None = None) -> str:
    env = {k: v for k, v in os.environ.items() if k != "GOGC"}
    if path is not None:
        env["PATH"] = path
    proc = subprocess.run([str(WRAPPER), str(tmp_path / "lock"), str(tool), *args], env=env,
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


@pytest.mark.parametrize(("package", "gogc"), [
    pytest.param(f"{SDK}/core/v1", "25", id="the SDK's core/v1: the largest, GOGC=25"),
    pytest.param(f"{SDK}/apps/v1", "50", id="another SDK package: GOGC=50"),
    pytest.param("github.com/pulumi/pulumi/sdk/v3/go/pulumi", "50", id="pulumi/sdk/v3 go/pulumi: GOGC=50"),
    pytest.param("fmt", "unset", id="any other package: Go's default"),
    pytest.param(f"{SDK}/core/v1extra", "50", id="a longer name is not core/v1"),
])
def test_compile_gets_the_gogc_of_its_package(tmp_path: Path, package: str, gogc: str) -> None:
    out = _run(tmp_path, _tool(tmp_path, "compile"), "-o", "x.a", "-p", package, "a.go")
    assert out == f"GOGC={gogc} -o x.a -p {package} a.go"       # the arguments pass through as given


def test_other_tools_and_version_probes_pass_through(tmp_path: Path) -> None:
    # go asks every tool for `-V=full` to key its cache; asm and link are never limited.
    assert _run(tmp_path, _tool(tmp_path, "compile"), "-V=full") == "GOGC=unset -V=full"
    assert _run(tmp_path, _tool(tmp_path, "asm"), "-p", f"{SDK}/core/v1") == f"GOGC=unset -p {SDK}/core/v1"


def test_without_flock_only_gogc_applies(tmp_path: Path) -> None:
    # A PATH with no flock(1) on it: the SDK's packages still compile, at their GOGC, unlocked.
    out = _run(tmp_path, _tool(tmp_path, "compile"), "-p", f"{SDK}/core/v1", path=str(tmp_path / "empty"))
    assert out == f"GOGC=25 -p {SDK}/core/v1"
    assert not (tmp_path / "lock").exists()


class _Holder:
    """flock(1) holding LOCK (shared or exclusive) until released: it runs `cat`, which ends when
    its stdin is closed. Started only once the lock is seen taken (a non-blocking attempt at the
    conflicting mode fails), so nothing depends on how fast the machine is."""

    def __init__(self, lock: Path, mode: str) -> None:
        self.proc = subprocess.Popen(["flock", mode, str(lock), "cat"], stdin=subprocess.PIPE,
                                     stdout=subprocess.DEVNULL)
        conflicting = "-s" if mode == "-x" else "-x"
        deadline = time.monotonic() + 30
        while subprocess.run(["flock", "-n", conflicting, str(lock), "true"]).returncode == 0:
            assert time.monotonic() < deadline, "flock did not take the lock within 30 s"
            time.sleep(0.05)

    def release(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


def _start(tmp_path: Path, tool: Path, package: str) -> subprocess.Popen[str]:
    return subprocess.Popen([str(WRAPPER), str(tmp_path / "lock"), str(tool), "-p", package],
                            stdout=subprocess.PIPE, text=True)


@needs_flock
@pytest.mark.parametrize(("held", "package", "waits"), [
    pytest.param("-s", f"{SDK}/core/v1", True, id="core/v1 waits while another SDK package compiles"),
    pytest.param("-x", f"{SDK}/apps/v1", True, id="an SDK package waits while core/v1 compiles"),
    pytest.param("-s", f"{SDK}/apps/v1", False, id="two other SDK packages compile side by side"),
    pytest.param("-x", "fmt", False, id="a small package never waits"),
])
def test_the_lock_keeps_core_v1_alone_among_the_sdk_packages(tmp_path: Path, held: str, package: str,
                                                             waits: bool) -> None:
    holder = _Holder(tmp_path / "lock", held)
    compile_ = _start(tmp_path, _tool(tmp_path, "compile"), package)
    try:
        if waits:
            with pytest.raises(subprocess.TimeoutExpired):
                compile_.wait(timeout=1.0)          # still blocked on the lock
            holder.release()
        assert compile_.wait(timeout=30) == 0        # runs once the lock is free (or at once)
        assert compile_.stdout is not None and package in compile_.stdout.read()
    finally:
        if holder.proc.poll() is None:
            holder.release()
        compile_.kill()
        compile_.wait(timeout=30)


@needs_flock
@pytest.mark.parametrize(("tool", "held", "args", "waits"), [
    pytest.param("compile", "-x", ("-p", "k8s.io/api/core/v1"), True,
                 id="a compile beside waits while core/v1 compiles"),
    pytest.param("link", "-x", ("-o", "kube-apiserver", "main.a"), True,
                 id="a link beside waits while core/v1 compiles"),
    pytest.param("compile", "-s", ("-p", "k8s.io/api/core/v1"), False,
                 id="a compile beside runs while other SDK packages compile"),
    pytest.param("compile", "-x", ("-V=full",), False, id="a version probe beside never waits"),
    pytest.param("asm", "-x", ("-p", "runtime"), False, id="asm beside never waits"),
])
def test_a_build_beside_the_provider_never_runs_with_core_v1(tmp_path: Path, tool: str, held: str,
                                                             args: tuple[str, ...], waits: bool) -> None:
    holder = _Holder(tmp_path / "lock", held)
    proc = subprocess.Popen([str(WRAPPER), "--beside", str(tmp_path / "lock"), str(_tool(tmp_path, tool)), *args],
                            stdout=subprocess.PIPE, text=True)
    try:
        if waits:
            with pytest.raises(subprocess.TimeoutExpired):
                proc.wait(timeout=1.0)
            holder.release()
        assert proc.wait(timeout=30) == 0
        assert proc.stdout is not None and proc.stdout.read().strip() == "GOGC=unset " + " ".join(args)
    finally:
        if holder.proc.poll() is None:
            holder.release()
        proc.kill()
        proc.wait(timeout=30)
