"""The reconcile loop (driver/reconcile.py) with a fake stack: when it applies, what it logs,
how it stops, and the one-loop-per-stack lock. The real loop on the sim stack is in tests/sim."""

from __future__ import annotations

import io
import os
import threading
import time
from collections.abc import Mapping
from pathlib import Path

import pytest
from pulumi import automation as auto

from driver.reconcile import ReconcileError, Reconciler, exclusive, parse_interval, unreachable


class FakeStack:
    def __init__(self, previews: list[Mapping[str, int]], refresh_fails: set[int] | None = None) -> None:
        self.previews = previews
        self.refresh_fails = refresh_fails or set()
        self.refresh_skips: set[int] = set()
        self.calls: list[str] = []
        self.cycle = 0
        self.loop: Reconciler | None = None
        self.stop_in_up = False
        self.counts: list[Mapping[str, int]] = []

    def refresh(self) -> str | None:
        self.cycle += 1
        self.calls.append("refresh")
        if self.cycle in self.refresh_fails:
            raise auto.errors.CommandError(auto.CommandResult(stdout="", stderr="error: cluster unreachable", code=1))
        return "unreachable: eu-west" if self.cycle in self.refresh_skips else None

    def preview(self) -> Mapping[str, int]:
        self.calls.append("preview")
        return self.previews[min(self.cycle, len(self.previews)) - 1]

    def up(self) -> Mapping[str, int]:
        self.calls.append("up")
        if self.stop_in_up and self.loop is not None:
            self.loop.stop()
            raise auto.errors.CommandError(auto.CommandResult(stdout="", stderr="error: update canceled", code=255))
        return {"same": 3, **{k: v for k, v in self.previews[self.cycle - 1].items() if k != "same"}}

    def verification(self) -> str | None:
        return "all 2 placed replica(s) run where the plan put them"

    def autoscaling(self) -> Mapping[str, int]:
        """The counts the last `up` left (counts[0]: before the first cycle)."""
        return self.counts[min(self.cycle, len(self.counts) - 1)] if self.counts else {}

    def cancel(self) -> None:
        self.calls.append("cancel")


def loop(stack: FakeStack, interval: float = 0.01) -> tuple[Reconciler, io.StringIO]:
    out = io.StringIO()
    r = Reconciler("sim", stack, interval, out)
    stack.loop = r
    return r, out


@pytest.mark.parametrize(("text", "seconds"), [("60s", 60), ("2m", 120), ("1h", 3600), ("500ms", 0.5), ("90", 90)])
def test_intervals(text: str, seconds: float) -> None:
    assert parse_interval(text) == seconds


@pytest.mark.parametrize("text", ["", "0s", "-1s", "soon", "5d"])
def test_bad_intervals(text: str) -> None:
    with pytest.raises(ReconcileError):
        parse_interval(text)


def test_unchanged_cycles_never_update_and_a_change_is_applied_in_its_cycle() -> None:
    stack = FakeStack([{"same": 9}, {"same": 9}, {"same": 9}, {"same": 8, "update": 1}])
    r, out = loop(stack)
    assert r.run(4) == 0
    assert stack.calls == ["refresh", "preview"] * 3 + ["refresh", "preview", "up"]
    lines = out.getvalue().splitlines()
    assert len(lines) == 4
    assert all(" reconcile sim cycle " in ln and "preview: no changes; no update" in ln for ln in lines[:3])
    assert "preview: update 1; up: update 1; verify: all 2 placed replica(s) run" in lines[3]


def test_a_failed_refresh_is_logged_and_the_cycle_goes_on() -> None:
    stack = FakeStack([{"same": 9}], refresh_fails={1})
    r, out = loop(stack)
    assert r.run(1) == 0
    assert "refresh failed (error: cluster unreachable); preview: no changes; no update" in out.getvalue()


def test_a_refresh_skipped_while_a_cluster_is_unreachable_is_said() -> None:
    stack = FakeStack([{"same": 9}])
    stack.refresh_skips = {1}
    r, out = loop(stack)
    assert r.run(1) == 0
    assert "refresh skipped (unreachable: eu-west); preview: no changes; no update" in out.getvalue()


def test_unreachable_clusters_from_the_observation_output() -> None:
    outputs = {"observation": auto.OutputValue({"capacity": {}, "health": {
        "b": {"condition": "Unreachable", "since": 1, "reason": "x"},
        "a": {"condition": "Unready", "since": 1, "reason": "y"}}}, False)}
    assert unreachable(outputs) == ["b"]
    assert unreachable({}) == []


def test_a_stop_during_up_cancels_pulumi_and_ends_the_loop() -> None:
    stack = FakeStack([{"update": 1}, {"update": 1}])
    stack.stop_in_up = True
    r, out = loop(stack)
    assert r.run() == 0
    assert stack.calls == ["refresh", "preview", "up", "cancel"]
    assert "; stopped (" in out.getvalue()
    assert len(out.getvalue().splitlines()) == 1


def test_a_stop_between_cycles_ends_the_wait_at_once() -> None:
    stack = FakeStack([{"same": 1}])
    r, _ = loop(stack, interval=60)
    threading.Timer(0.3, r.stop).start()
    start = time.monotonic()
    assert r.run() == 0
    assert time.monotonic() - start < 5
    assert stack.calls == ["refresh", "preview", "cancel"]


def test_one_loop_per_stack(tmp_path: Path) -> None:
    lock = tmp_path / "locks" / "sim.lock"
    with exclusive(lock, "sim"):
        assert lock.read_text().strip() == str(os.getpid())
        with (pytest.raises(ReconcileError, match=rf"another reconcile loop runs for stack sim \(pid {os.getpid()}"),
              exclusive(lock, "sim")):
            pass
    with exclusive(lock, "sim"):        # released when the first loop ended
        pass


def test_a_cycle_that_changes_an_autoscaled_count_says_so() -> None:
    stack = FakeStack([{"same": 8, "update": 1}] * 3)
    stack.counts = [{"ml-team/chat": 1}, {"ml-team/chat": 3}, {"ml-team/chat": 3}, {"ml-team/chat": 1}]
    r, out = loop(stack)
    assert r.run(3) == 0
    lines = out.getvalue().splitlines()
    assert "; autoscaled: ml-team/chat 1 -> 3; verify: " in lines[0]    # against what the last up left
    assert "autoscaled" not in lines[1]
    assert "; autoscaled: ml-team/chat 3 -> 1; verify: " in lines[2]


def test_reconcile_metrics_must_be_a_file(tmp_path: Path) -> None:
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "modelplane", "reconcile", "--stack", "x", "--metrics",
                           str(tmp_path / "missing.json"), "--cwd", str(tmp_path)], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2 and "--metrics" in done.stderr and "no such file" in done.stderr
