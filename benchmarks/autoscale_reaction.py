"""Autoscaler reaction time: from a load step to the new replica serving traffic, in loop intervals.

    .venv/bin/python benchmarks/autoscale_reaction.py [--rounds 3] [--intervals 0.5,1,2] [--json]

The demo's loop (modelplane.runtime.scaling.LocalScaler, the pass the placement provider runs)
on real Traefik and mock engines on 127.0.0.1, with examples/autoscaling-live (each engine
serves 2 requests at once in 200 ms; RequestsRunning target 1.5, QueueDepth target 1). Each
round: one client until one replica serves it alone, then a step to three clients (one
replica saturated, one request waiting: the autoscaler asks for 2), and the time from the
step to:

* the decision: when the pass that scaled up began (its read: the loop runs on its own
  schedule and the step falls at a random point between two passes; a pass reads the engines
  first, so one that began before the step saw the old load);
* serving: the first answer from the new replica, through both hops (its engine started and
  answered, the workload gateway then the control plane loaded the routes naming it).

Both are given in seconds and in loop intervals (seconds / interval): the figure that does
not depend on the machine is the decision's, which waits for the next pass; the rest is the
engine's start and two Traefik reloads, the same at every interval. Then back to one client
and wait for the scale-in (its 8 s window, the drain) before the next round.
"""
from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from modelplane.api import load_manifests  # noqa: E402
from modelplane.commands.traffic import Load  # noqa: E402
from modelplane.runtime.fleet import LocalFleet  # noqa: E402
from modelplane.runtime.scaling import LocalScaler  # noqa: E402

FLEET = Path(__file__).resolve().parents[1] / "examples" / "autoscaling-live"
KEY = ("ml-team", "chat")
BEFORE_S = 3.0          # one client alone before each step
MAX_WAIT_S = 60.0


@dataclass
class Round:
    interval: float
    decision_s: float
    serving_s: float

    def to_json(self) -> dict[str, float]:
        return {"interval": self.interval, "decisionSeconds": self.decision_s, "servingSeconds": self.serving_s,
                "decisionIntervals": self.decision_s / self.interval,
                "servingIntervals": self.serving_s / self.interval}


class Loop:
    """The loop on its own schedule (a pass every `interval`, in a thread), as `demo` and
    `reconcile` run it: a load step falls anywhere between two passes."""

    def __init__(self, scaler: LocalScaler, interval: float) -> None:
        self.scaler, self.interval = scaler, interval
        self.reports: list = []
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                began, wall = time.monotonic(), time.time()
                self.reports.append((wall, self.scaler.cycle()))
                self._stop.wait(max(0.0, began + self.interval - time.monotonic()))
        except BaseException as exc:  # noqa: BLE001 - reported by wait()
            self.error = exc

    def __enter__(self) -> Loop:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(MAX_WAIT_S)

    def wait(self, done, limit: float = MAX_WAIT_S):
        """Until a pass that ends from now on has a report satisfying `done`; that report."""
        deadline, seen = time.monotonic() + limit, len(self.reports)
        while time.monotonic() < deadline:
            if self.error is not None:
                raise RuntimeError(f"the loop failed: {self.error!r}")
            for began, report in self.reports[seen:]:
                if done(report):
                    return began, report
            seen = len(self.reports)
            time.sleep(0.01)
        raise RuntimeError("the loop did not get there in time")


def one_round(loop: Loop, load: Load, rng: random.Random) -> Round:
    load.set_clients(1)
    _, settled = loop.wait(lambda r: r.counts.get(KEY) == 1 and not r.draining)
    time.sleep(BEFORE_S + rng.uniform(0, loop.interval))          # the step falls anywhere between passes
    before = set(settled.replicas[KEY])
    step = time.time()
    load.set_clients(3)
    began, report = loop.wait(lambda r: r.counts.get(KEY, 0) >= 2 and r.at >= step)
    new = set(report.replicas[KEY]) - before          # started, or taken back while it drained
    deadline = time.monotonic() + MAX_WAIT_S
    while time.monotonic() < deadline:
        served = [t for t, replica in list(load.served) if replica in new and t >= step]
        if served:
            return Round(loop.interval, began - step, min(served) - step)
        time.sleep(0.01)
    raise RuntimeError("the new replica never served")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--intervals", default="0.5,1,2", help="loop intervals to measure, seconds")
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    intervals = [float(x) for x in args.intervals.split(",")]
    fleet = load_manifests(FLEET)
    rounds: list[Round] = []
    failed = 0
    with LocalFleet() as local:
        scaler = LocalScaler(local, fleet)
        scaler.start()
        (route,) = [r for r in scaler.routes() if r.backends]
        load = Load(local.service_url(route.namespace, route.name))
        rng = random.Random(23)
        try:
            for interval in intervals:
                with Loop(scaler, interval) as loop:
                    for _ in range(args.rounds):
                        rounds.append(one_round(loop, load, rng))
                        print(f"interval {interval:g} s: the pass that scaled up began {rounds[-1].decision_s:.2f} s "
                              f"after the step, the new replica served {rounds[-1].serving_s:.2f} s after it",
                              file=sys.stderr, flush=True)
        finally:
            failed = load.stop().failed
    summary = []
    for interval in intervals:
        mine = [r for r in rounds if r.interval == interval]
        summary.append({"interval": interval, "rounds": len(mine),
                        "decisionIntervals": statistics.median(r.decision_s / interval for r in mine),
                        "servingIntervals": statistics.median(r.serving_s / interval for r in mine),
                        "servingSeconds": statistics.median(r.serving_s for r in mine),
                        "afterDecisionSeconds": statistics.median(r.serving_s - r.decision_s for r in mine)})
    if args.json:
        print(json.dumps({"rounds": [r.to_json() for r in rounds], "summary": summary, "failed": failed}, indent=1))
    else:
        print("| loop interval | rounds | deciding pass began (intervals) | new replica serving (intervals) | "
              "serving (s) | that pass's read -> serving (s) |")
        print("|---|---|---|---|---|---|")
        for s in summary:
            print(f"| {s['interval']:g} s | {s['rounds']} | {s['decisionIntervals']:.2f} | "
                  f"{s['servingIntervals']:.2f} | {s['servingSeconds']:.2f} | {s['afterDecisionSeconds']:.2f} |")
        print(f"failed requests over the run: {failed}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
