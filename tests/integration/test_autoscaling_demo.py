"""`modelplane demo` with a ReplicaAutoscaler in the fleet, as a user runs it: the loop
(modelplane.runtime.scaling) every second against real Traefik and mock engines on 127.0.0.1
(each serving 2 requests at once in 200 ms, metrics scraped from their /metrics) while split
clients drive load in steps of 1, 3, 6, then 1 client. The count rises from 1 across both
regions (2, then 4, the max), falls back to 1 once the 8 s scale-down window has passed, and
not one request fails over the whole run, scale-in included. `split --concurrency` alone."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from modelplane.__main__ import main

from .test_commands import _children

ROOT = Path(__file__).resolve().parents[2]
STEP = re.compile(r"^step (\d+): (\d+) client\(s\) on ml-team/chat: ml-team/chat: (\d+) replica\(s\) \(([^)]*)\); "
                  r"(\d+) requests, (\d+) failed$")


@pytest.mark.timeout(240)
def test_the_count_follows_the_load_steps_across_clusters_and_no_request_fails(traefik) -> None:
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "modelplane", "demo", str(ROOT / "examples" / "autoscaling-live"),
                           "--steps", "1,3,6,1", "--step-seconds", "14", "--interval", "1s"],
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
    # the scale-in: out of the routes first, drained, then stopped
    out = done.stdout
    assert re.search(r"ml-team/chat: 4 -> 1 replicas \((ScaledDown|ScaleDownLimit)\)", out), out
    assert "out of the routes, draining: " in out and "drained and stopped: " in out
    assert out.index("out of the routes, draining: ") < out.index("drained and stopped: ")
    assert "  failed: 0" in out and "stopped every engine and gateway the demo started" in out
    assert took < 120
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
