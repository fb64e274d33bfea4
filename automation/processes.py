"""The Pulumi CLI as the Automation API runs it, with every process it starts tracked so the
driver can stop them: a `pulumi up` is cancelled the way the CLI's Ctrl-C cancels it
(SIGINT: it finishes the steps in flight and saves its state), then terminated, then killed.

The Automation API takes a `PulumiCommand` (LocalWorkspaceOptions.pulumi_command) and runs
every CLI call through its `run`; this one starts each `pulumi` in a session of its own,
so a Ctrl-C in the terminal reaches the driver alone and the driver decides.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
from collections.abc import Mapping
from typing import IO

from pulumi.automation import PulumiCommand
from pulumi.automation._cmd import CommandResult, OnOutput
from pulumi.automation.errors import create_command_error

from modelplane.processes import KILL_WAIT_S, Child, Identity, left_in_session, start, stop_groups, stop_trees

CANCEL_GRACE_SECONDS = 120.0   # SIGINT -> SIGTERM: an up finishes the steps in flight
TERM_GRACE_SECONDS = 10.0      # SIGTERM -> SIGKILL
# SIGINT to the group is what a Ctrl-C in pulumi's own terminal sends
STOP_LADDER = ((signal.SIGINT, CANCEL_GRACE_SECONDS), (signal.SIGTERM, TERM_GRACE_SECONDS),
               (signal.SIGKILL, KILL_WAIT_S))


class TrackedPulumiCommand(PulumiCommand):
    """`PulumiCommand` whose processes `stop_all` can stop."""

    def __init__(self, root: str | None = None) -> None:
        """`root`: the Pulumi installation to run (<root>/bin/pulumi), as PulumiCommand's; by
        default the `pulumi` on PATH."""
        super().__init__(root=root, skip_version_check=True)
        self._lock = threading.Lock()
        self._running: set[subprocess.Popen[str]] = set()
        self.stopping = False

    def run(self, args: list[str], cwd: str, additional_env: Mapping[str, str], on_output: OnOutput | None = None,
            on_error: OnOutput | None = None, stdin: str | None = None) -> CommandResult:
        """What PulumiCommand.run does (non-interactive, the Automation API's environment,
        CommandError on failure), in a new session, tracked; `stdin` feeds a value the
        CLI reads from its input (a secret never goes on a command line)."""
        if "--non-interactive" not in args:
            args = ["--non-interactive", *args]
        env = {**os.environ, **additional_env, "PULUMI_AUTOMATION_API": "true"}
        if os.path.isabs(self.command):
            # as PulumiCommand does: the plugins installed beside that CLI come first
            env["PATH"] = os.pathsep.join([os.path.dirname(self.command), env.get("PATH", "")])
        with self._lock:
            if self.stopping:
                raise KeyboardInterrupt
            process: subprocess.Popen[str] = start(
                [self.command, *args], cwd=cwd, env=env, encoding="utf-8",
                stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            self._running.add(process)
        try:
            out: list[str] = []
            err: list[str] = []
            readers = [threading.Thread(target=_consume, args=(process.stdout, on_output, out), daemon=True),
                       threading.Thread(target=_consume, args=(process.stderr, on_error, err), daemon=True)]
            for reader in readers:
                reader.start()
            if stdin is not None and process.stdin is not None:
                with contextlib.suppress(BrokenPipeError):
                    process.stdin.write(stdin)
                process.stdin.close()
            for reader in readers:
                reader.join()
            process.wait()
            # a CLI that exited leaving a plugin running (CI at 162aca7: a shard preview's
            # pulumi-language-python under init): stop what is left of its session
            stop_groups([i for i in map(Identity.of, left_in_session(process.pid)) if i is not None])
        except BaseException:
            # a KeyboardInterrupt (a test run's SIGTERM becomes one) while the CLI runs: stop it
            # and what it started, or they outlive the caller
            stop_trees([Child(process)], STOP_LADDER)
            raise
        finally:
            with self._lock:
                self._running.discard(process)
        result = CommandResult(stdout="\n".join(out), stderr="\n".join(err), code=process.returncode)
        if process.returncode != 0:
            raise create_command_error(result)
        return result

    def stop_all(self) -> None:
        """Cancel every running pulumi (SIGINT to its group), then terminate and kill what
        is left, its plugins included (modelplane.processes.stop_trees); no new process
        starts afterwards."""
        with self._lock:
            self.stopping = True
            running = list(self._running)
        stop_trees([Child(p) for p in running], STOP_LADDER)


def _consume(stream: IO[str] | None, callback: OnOutput | None, chunks: list[str]) -> None:
    if stream is None:
        return
    for line in iter(stream.readline, ""):
        line = line.rstrip()
        if callback:
            callback(line)
        chunks.append(line)
    stream.close()
