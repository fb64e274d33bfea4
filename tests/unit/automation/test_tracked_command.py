"""automation.processes.TrackedPulumiCommand stops the CLI and the plugins it started.

The real CLI starts each plugin (language host, providers) in a process group of its own and
stops them itself only if it lives long enough; a CLI killed mid-`up` left
pulumi-language-python, pulumi-resource-pulumi-python and its `python -m pulumi.dynamic`
running under init (seen when a CI run was stopped with SIGTERM). A stand-in CLI here does the
same on purpose: it starts a "plugin" in a session of its own, writes the plugin's pid, and dies
at the first signal without stopping it. Real processes, no mocks: a pid and a session are
kernel facts."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from pulumi.automation.errors import CommandError

from automation.processes import TrackedPulumiCommand
from modelplane.processes import Identity

REPO = Path(__file__).resolve().parents[3]
WAIT_S = 60.0   # generous: a loaded 2-core machine; every wait ends as soon as its condition holds

FAKE_CLI = textwrap.dedent("""\
    #!{python}
    import os, signal, subprocess, sys, time
    if sys.argv[1:] == ["version"]:
        print("v3.200.0")
        sys.exit(0)
    plugin = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"], start_new_session=True)
    pid_file = os.environ["FAKE_PLUGIN_PID_FILE"]
    with open(pid_file + ".tmp", "w") as fh:
        fh.write(str(plugin.pid))
    os.replace(pid_file + ".tmp", pid_file)
    # a CLI that dies at once on any signal, leaving its plugin behind
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: os._exit(3))
    time.sleep(300)
    """)

DRIVER = textwrap.dedent("""\
    import signal, sys
    signal.signal(signal.SIGINT, signal.default_int_handler)
    from automation.processes import TrackedPulumiCommand
    try:
        TrackedPulumiCommand(root=sys.argv[1]).run(["up"], ".", {{}})
    except KeyboardInterrupt:
        sys.exit(42)
    """)


@pytest.fixture
def fake_root(tmp_path: Path) -> Path:
    cli = tmp_path / "root" / "bin" / "pulumi"
    cli.parent.mkdir(parents=True)
    cli.write_text(FAKE_CLI.format(python=sys.executable))
    cli.chmod(0o755)
    return cli.parent.parent


@pytest.fixture
def plugin_pid_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    pid_file = tmp_path / "plugin.pid"
    monkeypatch.setenv("FAKE_PLUGIN_PID_FILE", str(pid_file))
    yield pid_file
    if pid_file.exists():   # whatever the test did, no plugin outlives it
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.killpg(int(pid_file.read_text()), signal.SIGKILL)


def _plugin(pid_file: Path) -> Identity:
    deadline = time.monotonic() + WAIT_S
    while not pid_file.exists():
        assert time.monotonic() < deadline, "the stand-in CLI never started its plugin"
        time.sleep(0.05)
    ident = Identity.of(int(pid_file.read_text()))
    assert ident is not None and ident.alive()
    assert os.getpgid(ident.pid) == ident.pid, "the plugin leads a group of its own, as pulumi's do"
    return ident


def _gone(ident: Identity) -> bool:
    deadline = time.monotonic() + WAIT_S    # reparented to init, reaped there
    while ident.alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    return not ident.alive()


def test_stop_all_stops_the_plugins_a_cli_dying_at_once_leaves_behind(fake_root: Path, plugin_pid_file: Path) -> None:
    command = TrackedPulumiCommand(root=str(fake_root))
    failures: list[BaseException] = []

    def up() -> None:
        try:
            command.run(["up"], str(REPO), {})
        except BaseException as exc:   # noqa: BLE001 - the thread hands what it raised to the test
            failures.append(exc)

    runner = threading.Thread(target=up, daemon=True)
    runner.start()
    plugin = _plugin(plugin_pid_file)
    command.stop_all()
    runner.join(WAIT_S)
    assert not runner.is_alive()
    assert len(failures) == 1 and isinstance(failures[0], CommandError)   # the cancelled up fails
    assert _gone(plugin), "the plugin outlived the stopped CLI"


def test_an_interrupt_while_the_cli_runs_stops_it_and_its_plugins(fake_root: Path, plugin_pid_file: Path) -> None:
    """A KeyboardInterrupt in run() (a test run's SIGTERM becomes one, tests/signals.py) stops
    the CLI's tree before it propagates. In a process of its own, where SIGINT reaches the main
    thread that waits in run()."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    driver = subprocess.Popen([sys.executable, "-c", DRIVER.format(), str(fake_root)], cwd=REPO, env=env,
                              start_new_session=True)
    try:
        plugin = _plugin(plugin_pid_file)
        driver.send_signal(signal.SIGINT)
        assert driver.wait(WAIT_S) == 42, "the interrupt did not reach the caller"
        assert _gone(plugin), "the plugin outlived the interrupted run"
    finally:
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)
            driver.wait(5)


# A CLI that exits 0 and leaves its plugin running: the plugin leads a process group of its own in
# the CLI's session, as the real CLI puts its plugins (seen in CI at 162aca7: a shard preview's
# pulumi-language-python, still running under init after the run).
EXITING_CLI = textwrap.dedent("""\
    #!{python}
    import os, subprocess, sys
    if sys.argv[1:] == ["version"]:
        print("v3.200.0")
        sys.exit(0)
    plugin = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"], process_group=0,
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    pid_file = os.environ["FAKE_PLUGIN_PID_FILE"]
    with open(pid_file + ".tmp", "w") as fh:
        fh.write(str(plugin.pid))
    os.replace(pid_file + ".tmp", pid_file)
    sys.exit(0)
    """)


def test_a_plugin_a_cli_left_running_when_it_exited_is_stopped_before_run_returns(
        tmp_path: Path, plugin_pid_file: Path) -> None:
    cli = tmp_path / "exiting" / "bin" / "pulumi"
    cli.parent.mkdir(parents=True)
    cli.write_text(EXITING_CLI.format(python=sys.executable))
    cli.chmod(0o755)
    result = TrackedPulumiCommand(root=str(cli.parent.parent)).run(["preview"], str(REPO), {})
    assert result.code == 0
    plugin = Identity.of(int(plugin_pid_file.read_text()))
    assert plugin is None or _gone(plugin), "the plugin the CLI left behind still runs"
