"""`modelplane demo` with a ReplicaAutoscaler in the fleet, as a user runs it: the loop
(modelplane.runtime.scaling) every second against real Traefik and mock engines on 127.0.0.1
(each serving 2 requests at once in 200 ms, metrics scraped from their /metrics) while split
clients drive load in steps of 1, 3, 6, then 1 client. The count rises from 1 across both
regions (2, then 4, the max), falls back to 1 once the 8 s scale-down window has passed, and
not one request fails over the whole run, scale-in included. The last step runs until the
loop is at rest (`--settle`), a condition, not a step long enough on a quiet machine: CI
under load read the one client of the last step as two running requests a few seconds into
it (an engine counts a request until its handler returns, after the client has its answer
and sent the next), so 2 replicas were held a window longer, 4 -> 2 -> 1 and not 4 -> 1.
`split --concurrency` alone."""

from __future__ import annotations

import itertools
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from modelplane.__main__ import main

from .test_commands import _children

ROOT = Path(__file__).resolve().parents[2]
SCALE_DOWN = re.compile(r"^  ml-team/chat: (\d+) -> (\d+) replicas \((\w+)\)", re.M)
STEP = re.compile(r"^step (\d+): (\d+) client\(s\) on ml-team/chat: ml-team/chat: (\d+) replica\(s\) \(([^)]*)\); "
                  r"(\d+) requests, (\d+) failed$")


@pytest.mark.timeout(240)
def test_the_count_follows_the_load_steps_across_clusters_and_no_request_fails(traefik) -> None:
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "modelplane", "demo", str(ROOT / "examples" / "autoscaling-live"),
                           "--steps", "1,3,6,1", "--step-seconds", "14", "--interval", "1s", "--settle", "40"],
                          cwd=ROOT, capture_output=True, text=True, timeout=200)
    took = time.monotonic() - started
    assert done.returncode == 0, done.stdout + done.stderr
    steps = [STEP.match(line) for line in done.stdout.splitlines()]
    steps = [m for m in steps if m]
    assert [int(m.group(3)) for m in steps] == [1, 2, 4, 1], done.stdout
    assert [int(m.group(2)) for m in steps] == [1, 3, 6, 1]
    # across clusters as the load rises: both regions by the second step
    assert steps[1].group(4) == "eu-west 1, us-east 1" and steps[2].group(4) == "eu-west 2, us-east 2"
    assert all(int(m.group(6)) == 0 for m in steps), done.stdout
    assert all(int(m.group(5)) > 0 for m in steps)
    # the scale-in: from 4 to 1, each change a scale-down as HPA words it, then at rest;
    # out of the routes first, drained, then stopped
    out = done.stdout
    downs = [(int(a), int(b), why) for a, b, why in SCALE_DOWN.findall(out[out.index("step 3: "):])]
    assert downs and downs[0][0] == 4 and downs[-1][1] == 1, out
    assert all(b < a for a, b, _ in downs) and all(x[1] == y[0] for x, y in itertools.pairwise(downs)), out
    assert {why for *_, why in downs} <= {"ScaledDown", "ScaleDownLimit", "ScaleDownStabilized"}, out
    assert re.search(r"^  at rest \d+\.\d s after the step's time$", out, re.M), out
    assert "out of the routes, draining: " in out and "drained and stopped: " in out
    assert out.index("out of the routes, draining: ") < out.index("drained and stopped: ")
    assert "  failed: 0" in out and "stopped every engine and gateway the demo started" in out
    assert took < 150
    assert not _children()


@pytest.mark.timeout(120)
@pytest.mark.parametrize(("settle", "at_rest"), [pytest.param("30", True, id="until-at-rest"),
                                                 pytest.param("500ms", False, id="out-of-time")])
def test_settle_holds_the_last_step_until_the_loop_is_at_rest(traefik, settle: str, at_rest: bool) -> None:
    """A last step (6 s) shorter than the scale-down window (8 s): the scale-in can only come
    after the step's time. `--settle 30` runs the loop on, with the step's one client, until
    the count is 1 and nothing drains, and says how long that took; `--settle 1` says it ran
    out of time and what the loop still has to do (at rest needs a pass after the window to
    scale in and one more to find the leaving replicas idle: not within 6.5 s)."""
    done = subprocess.run([sys.executable, "-m", "modelplane", "demo", str(ROOT / "examples" / "autoscaling-live"),
                           "--steps", "6,1", "--step-seconds", "6", "--interval", "1s", "--settle", settle],
                          cwd=ROOT, capture_output=True, text=True, timeout=100)
    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    steps = [m for m in map(STEP.match, out.splitlines()) if m]
    assert [int(m.group(2)) for m in steps] == [6, 1] and int(steps[0].group(3)) == 4, out
    assert all(int(m.group(6)) == 0 for m in steps), out
    after = out[out.index("step 1: "):out.index("step 2: ")]
    if at_rest:
        waited = re.search(r"^  at rest (\d+\.\d) s after the step's time$", after, re.M)
        assert waited and float(waited.group(1)) > 0, out       # the window outlasts the step
        assert after.index("drained and stopped: ") < waited.start(), out
        assert SCALE_DOWN.search(after) and int(steps[1].group(3)) == 1, out
    else:
        assert re.search(r"^  not at rest after --settle 0.5 s: (ml-team/chat: |draining: )", after, re.M), out
        assert "  at rest " not in after, out
    assert not _children()


def test_split_concurrency_shares_n_requests_over_clients(fleet, capsys) -> None:
    eng = fleet.start_engine("solo-7f3a1", deployment="solo", extra=["--delay-ms", "100"])
    started = time.monotonic()
    assert main(["split", eng.url, "-n", "20", "--concurrency", "5"]) == 0
    assert time.monotonic() - started < 20 * 0.1      # in parallel, not one after the other
    out = capsys.readouterr().out
    assert "solo-7f3a1        20   100.0%" in out and "failed: 0" in out
    assert main(["split", eng.url, "--concurrency", "0"]) == 2


def test_the_autoscaling_demo_stops_everything_on_sigterm_mid_scale(traefik, tmp_path) -> None:
    """Terminated while the loop scales (engines starting, clients sending): exit 143, one
    line, no child, no listening port, no work directory left."""
    import signal

    from .test_demo_hardening import Demo, _alive, _children, _listening_ports, _refused

    demo = Demo(tmp_path, "examples/autoscaling-live", "--steps", "6", "--step-seconds", "60")
    try:
        demo.wait_for("started ")                            # the loop is adding replicas
        children = _children(demo.proc.pid)
        ports = _listening_ports(children)
        assert len(children) >= 4 and demo.leftovers()
        demo.proc.send_signal(signal.SIGTERM)
        demo.proc.wait(60)
        err = demo.proc.stderr.read()
    finally:
        if demo.proc.poll() is None:
            demo.proc.kill()
    assert demo.proc.returncode == 128 + signal.SIGTERM
    assert err.strip() == "demo: interrupted by SIGTERM; stopped every engine and gateway the demo started"
    assert not [p for p in children if _alive(p)]
    assert all(_refused(p) for p in ports)
    assert demo.leftovers() == []
