"""`python -m modelplane reconcile --stack NAME --interval 60s`: keep a stack's clusters as its
fleet says, continuously (docs/observe.md, "Continuous reconciliation").

Each cycle: refresh (the state learns what changed in the clusters; a failure, e.g. an
unreachable cluster, is logged and the cycle goes on), preview (the placement resource's check()
reads the clusters: observed capacity, health, failover), and `up` only when the preview has
changes: the placement, the observation, or objects the refresh found drifted. One log line per
cycle. Cycles start every `interval` seconds (the next at once when one ran longer).

One loop per stack at a time: an exclusive lock file (`flock`) held for the loop's life, so a
second loop for the same stack on this machine refuses to start and names the first one's pid.
SIGTERM, SIGINT or SIGHUP stop the loop: between cycles at once; during one, the running
`pulumi` is cancelled the way its own Ctrl-C cancels it (it finishes the steps in flight and
saves its state; driver.processes), then the loop exits.
"""

from __future__ import annotations

import contextlib
import datetime
import errno
import fcntl
import os
import re
import stat
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TextIO

from pulumi import automation as auto

from driver.processes import TrackedPulumiCommand
from modelplane.durations import MAX_INTERVAL_S, DurationError, parse_duration
from modelplane.observe import HEALTH_KEY
from modelplane.observe.health import UNREACHABLE
from modelplane.redact import outside_text

LOCK_DIR = Path(".modelplane") / "reconcile"
VERIFICATION_OUTPUT = "verification"
OBSERVATION_OUTPUT = "observation"
AUTOSCALING_OUTPUT = "autoscaling"


class ReconcileError(Exception):
    """A problem the user fixes: a bad interval, a loop already running, a missing stack."""


def parse_interval(text: str) -> float:
    """`60s`, `2m`, `1h`, `500ms` or plain seconds -> seconds (> 0, at most MAX_INTERVAL_S)."""
    try:
        return parse_duration(text, "--interval", maximum=MAX_INTERVAL_S)
    except DurationError as exc:
        raise ReconcileError(str(exc)) from None


class StackOps(Protocol):
    """What a cycle asks of the stack (the Automation API in production, fakes in tests)."""

    def refresh(self) -> str | None: ...                 # why it was skipped, or None
    def preview(self) -> Mapping[str, int]: ...          # change summary: op -> resources
    def up(self) -> Mapping[str, int]: ...
    def verification(self) -> str | None: ...            # the stack output's summary, if any
    def autoscaling(self) -> Mapping[str, int]: ...      # each autoscaled deployment's count (its output)
    def cancel(self) -> None: ...                        # stop a running pulumi now


def changes(summary: Mapping[str, int]) -> dict[str, int]:
    """The operations of a change summary that change something ("same" does not)."""
    return {op: n for op, n in sorted(summary.items()) if op != "same" and n}


def _summary(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{op} {n}" for op, n in counts.items()) or "no changes"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    lines = [re.sub(r"^(stderr|stdout|code):\s*", "", ln.strip()) for ln in text.splitlines() if ln.strip()]
    errors = [ln for ln in lines if "error" in ln.lower()]
    return (errors or lines or [type(exc).__name__])[-1][:300]


@dataclass
class Cycle:
    number: int
    refresh: str = "ok"
    preview: dict[str, int] | None = None
    applied: dict[str, int] | None = None
    verification: str | None = None
    scaled: str | None = None            # what the autoscalers changed: "ml-team/chat 1 -> 3"
    error: str | None = None
    seconds: float = 0.0
    stopped: bool = False

    def line(self, stack: str, clock: Callable[[], float] = time.time) -> str:
        when = datetime.datetime.fromtimestamp(clock(), datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        parts = [f"refresh {self.refresh}"]
        if self.preview is not None:
            parts.append(f"preview: {_summary(self.preview)}")
            parts.append(f"up: {_summary(self.applied)}" if self.applied is not None else "no update")
        if self.scaled:
            parts.append(f"autoscaled: {self.scaled}")
        if self.verification:
            parts.append(f"verify: {self.verification}")
        if self.error:
            parts.append(f"FAILED: {self.error}")
        if self.stopped:
            parts.append("stopped")
        return f"{when} reconcile {stack} cycle {self.number}: {'; '.join(parts)} ({self.seconds:.1f} s)"


@dataclass
class Reconciler:
    stack: str
    ops: StackOps
    interval: float
    out: TextIO
    clock: Callable[[], float] = time.monotonic
    stopping: threading.Event = field(default_factory=threading.Event)
    cycles: list[Cycle] = field(default_factory=list)
    counts: dict[str, int] | None = None  # the autoscaled counts after the last up

    def stop(self) -> None:
        """Ask the loop to end (signal handlers call this): now between cycles, after
        cancelling the running pulumi during one."""
        self.stopping.set()
        self.ops.cancel()

    def cycle(self, number: int) -> Cycle:
        start = self.clock()
        result = Cycle(number)
        try:
            try:
                skipped = self.ops.refresh()
                if skipped:
                    result.refresh = f"skipped ({skipped})"
            except auto.errors.CommandError as exc:
                if self.stopping.is_set():
                    raise
                result.refresh = f"failed ({_first_line(exc)})"
            if not self.stopping.is_set():
                result.preview = changes(self.ops.preview())
            if result.preview and not self.stopping.is_set():
                result.applied = changes(self.ops.up())
                result.verification = self.ops.verification()
                result.scaled = self._scaled(self.ops.autoscaling())
        except (auto.errors.CommandError, KeyboardInterrupt) as exc:
            if self.stopping.is_set():
                result.stopped = True
            else:
                result.error = _first_line(exc)
        result.stopped = result.stopped or self.stopping.is_set()
        result.seconds = self.clock() - start
        return result

    def _scaled(self, counts: Mapping[str, int]) -> str | None:
        before, self.counts = self.counts, dict(counts)
        moved = [f"{k} {(before or {}).get(k, '?')} -> {n}" for k, n in sorted(counts.items())
                 if before is None or before.get(k) != n]
        return ", ".join(moved) if moved and before is not None else None

    def run(self, count: int | None = None) -> int:
        """Cycles until stopped (or `count` of them); 0, or 1 when a cycle failed."""
        number = 0
        failed = False
        try:
            self.counts = dict(self.ops.autoscaling())      # what the last `up` left: the first change is news
        except auto.errors.CommandError:
            self.counts = None
        while not self.stopping.is_set() and (count is None or number < count):
            number += 1
            start = self.clock()
            cycle = self.cycle(number)
            self.cycles.append(cycle)
            failed = failed or cycle.error is not None
            self.out.write(cycle.line(self.stack) + "\n")
            self.out.flush()
            if count is not None and number >= count:
                break
            self.stopping.wait(max(0.0, self.interval - (self.clock() - start)))
        return 1 if failed else 0


@contextlib.contextmanager
def exclusive(lock: Path, stack: str, root: Path | None = None) -> Iterator[None]:
    """Hold `lock` for the loop's life; ReconcileError when another process holds it. The lock
    is never reached through a symlink (a symlink planted there would have its target
    truncated): its directories below `root` (created if missing; `root` itself never is) and
    the file itself must be real, and the file a regular one."""
    _lock_directories(lock.parent, root)
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, 0o644)
    except OSError as exc:
        why = "it is a symlink" if exc.errno == errno.ELOOP else (exc.strerror or str(exc))
        raise ReconcileError(f"cannot use the lock file {lock}: {why}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ReconcileError(f"cannot use the lock file {lock}: it is not a regular file")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise
            holder = outside_text(os.pread(fd, 32, 0).decode(errors="replace"), limit=32) or "unknown"
            raise ReconcileError(f"another reconcile loop runs for stack {stack} (pid {holder}, lock {lock}); "
                                 "stop it first (SIGTERM)") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)                        # closing the descriptor releases the lock


def _lock_directories(directory: Path, root: Path | None) -> None:
    """Make `directory` (below `root`, which must exist) without following a symlink."""
    if root is not None:
        if not root.is_dir():
            raise ReconcileError(f"the project directory {root} does not exist (--cwd); it is not created")
        try:
            parts = directory.relative_to(root).parts
        except ValueError:
            raise ReconcileError(f"the lock directory {directory} is outside the project {root}") from None
        base = root
    else:
        parts, base = directory.parts, Path(directory.anchor or ".")
        parts = parts[1:] if directory.anchor else parts
    for part in parts:
        base = base / part
        try:
            os.mkdir(base, 0o755)
        except FileExistsError:
            pass
        except OSError as exc:
            raise ReconcileError(f"cannot create the lock directory {base}: {exc.strerror or exc}") from None
        if root is not None and (base.is_symlink() or not base.is_dir()):
            raise ReconcileError(f"the lock directory {base} is a symlink or not a directory; remove it")


# Pulumi's own rule for stack and project names (pkg/backend/diy: stackNameAndProjectRegexp), each
# part of `[organization/[project/]]stack`.
_STACK_PART = re.compile(r"[A-Za-z0-9_.-]{1,100}")


def check_stack_name(stack: str) -> str:
    """`stack` when Pulumi would accept it as a stack name (`name`, `project/name` or
    `organization/project/name`, each part of letters, digits, `-`, `_` and `.`); ReconcileError
    otherwise. A name made only of dots is refused too: it would name a directory."""
    parts = stack.split("/")
    if not 1 <= len(parts) <= 3 or not all(_STACK_PART.fullmatch(p) and p.strip(".") for p in parts):
        raise ReconcileError(f"--stack {stack[:120]!r}: a stack name may only contain letters, digits, hyphens, "
                             "underscores or periods (optionally as organization/project/name)")
    return stack


class AutomationOps:
    """The stack through the Automation API, every pulumi process tracked so `cancel` can stop it.
    `env`: variables every pulumi run gets (`--metrics FILE`: the autoscalers' metrics file)."""

    def __init__(self, project: Path, stack: str, env: Mapping[str, str] | None = None) -> None:
        self.command = TrackedPulumiCommand()
        secrets = "passphrase" if ("PULUMI_CONFIG_PASSPHRASE" in os.environ
                                   or "PULUMI_CONFIG_PASSPHRASE_FILE" in os.environ) else None
        workspace = auto.LocalWorkspace(work_dir=str(project), secrets_provider=secrets, pulumi_command=self.command,
                                        env_vars=dict(env or {}))
        try:
            self.stack = auto.Stack.select(stack, workspace)
        except auto.errors.StackNotFoundError:
            raise ReconcileError(f"no stack {stack}: create it (`pulumi stack init {stack}`) with its config in "
                                 f"stacks/Pulumi.{stack}.yaml") from None

    def refresh(self) -> str | None:
        """Refresh, except while a cluster is unreachable: a refresh cannot read its objects (and
        a provider set to delete unreachable clusters' objects would drop them from the state)."""
        down = unreachable(self.stack.outputs())
        if down:
            return f"unreachable: {', '.join(down)}"
        self.stack.refresh(color="never")
        return None

    def preview(self) -> Mapping[str, int]:
        return {str(op): n for op, n in self.stack.preview(color="never").change_summary.items()}

    def up(self) -> Mapping[str, int]:
        return {str(op): n for op, n in (self.stack.up(color="never").summary.resource_changes or {}).items()}

    def verification(self) -> str | None:
        output = self.stack.outputs().get(VERIFICATION_OUTPUT)
        value: Any = output.value if output is not None else None
        return str(value.get("summary")) if isinstance(value, Mapping) and value.get("summary") else None

    def autoscaling(self) -> Mapping[str, int]:
        return autoscaled_counts(self.stack.outputs())

    def cancel(self) -> None:
        self.command.stop_all()


def autoscaled_counts(outputs: Mapping[str, auto.OutputValue]) -> dict[str, int]:
    """Each autoscaled deployment's count, from the `autoscaling` output (components/autoscale.py)."""
    output = outputs.get(AUTOSCALING_OUTPUT)
    value: Any = output.value if output is not None else None
    scalers = value.get("autoscalers") if isinstance(value, Mapping) else None
    return {str(k): int(v["replicas"]) for k, v in (scalers or {}).items()
            if isinstance(v, Mapping) and isinstance(v.get("replicas"), (int, float))}


def unreachable(outputs: Mapping[str, auto.OutputValue]) -> list[str]:
    """Clusters the last run found unreachable (the `observation` output's health)."""
    output = outputs.get(OBSERVATION_OUTPUT)
    value: Any = output.value if output is not None else None
    health = value.get(HEALTH_KEY) if isinstance(value, Mapping) else None
    return sorted(c for c, h in (health or {}).items() if isinstance(h, Mapping) and h.get("condition") == UNREACHABLE)


def lock_path(project: Path, stack: str) -> Path:
    """The stack's lock file in the project (its name checked: no path ever leaves LOCK_DIR)."""
    return project / LOCK_DIR / f"{check_stack_name(stack).replace('/', '+')}.lock"
