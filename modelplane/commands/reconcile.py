"""`python -m modelplane reconcile --stack NAME --interval 60s`: refresh, preview and apply a
stack whenever its placement or its clusters changed, one log line per cycle, until SIGTERM
(driver/reconcile.py; docs/observe.md)."""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path
from types import FrameType
from typing import Any

PROJECT = Path(__file__).resolve().parents[2]
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "reconcile", help="keep a stack's clusters as the fleet says: refresh, preview, up when changed",
        description="Every interval: refresh the stack, preview it (the placement reads the clusters: observed "
                    "capacity, health, failover) and run `up` when the preview has changes. One line per cycle; "
                    "one loop per stack (a lock); SIGTERM stops it cleanly. Needs the pulumi CLI on PATH "
                    "(docs/engine-tools.md).")
    p.add_argument("--stack", required=True, help="the stack (its config: stacks/Pulumi.<stack>.yaml)")
    p.add_argument("--interval", default="60s", help="time between cycle starts: 60s, 2m, 1h (default 60s)")
    p.add_argument("--cycles", type=int, default=None, metavar="N", help="stop after N cycles (default: run on)")
    p.add_argument("--cwd", default=str(PROJECT), help="the Pulumi project directory (default: this checkout)")
    p.add_argument("--metrics", metavar="FILE", default=None,
                   help='the ReplicaAutoscalers read their metrics from this file ({"<namespace>/<deployment>": '
                        '{"<metric type>": <average per ready replica>}}, as `plan --metrics`), re-read every cycle, '
                        "instead of the engines (docs/autoscaling.md)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # The Automation API and the Pulumi SDK, which modelplane's core never imports: loaded
    # only when this command runs.
    from driver.reconcile import AutomationOps, ReconcileError, Reconciler, exclusive, lock_path, parse_interval
    from modelplane.autoscale.loop import METRICS_FILE_ENV

    if args.cycles is not None and args.cycles < 1:
        print("error: --cycles must be at least 1", file=sys.stderr)
        return 2
    project = Path(args.cwd)
    try:
        interval = parse_interval(args.interval)
        if not project.is_dir():
            raise ReconcileError(f"--cwd {args.cwd}: no such directory (the Pulumi project); it is not created")
        env = {}
        if args.metrics is not None:
            metrics = Path(args.metrics).resolve()
            if not metrics.is_file():
                raise ReconcileError(f"--metrics {args.metrics}: no such file")
            env[METRICS_FILE_ENV] = str(metrics)
        with exclusive(lock_path(project, args.stack), args.stack, root=project):
            ops = AutomationOps(project, args.stack, env)
            loop = Reconciler(args.stack, ops, interval, sys.stdout)

            def stop(signum: int, _frame: FrameType | None) -> None:
                print(f"reconcile {args.stack}: {signal.Signals(signum).name}: stopping", file=sys.stderr, flush=True)
                loop.stop()

            previous = {s: signal.signal(s, stop) for s in STOP_SIGNALS}
            try:
                return loop.run(args.cycles)
            finally:
                for s, handler in previous.items():
                    signal.signal(s, handler)
    except ReconcileError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except FileNotFoundError:
        print("error: no `pulumi` on PATH: install the Pulumi CLI, or `eval \"$(scripts/engine-env)\"` "
              "(docs/engine-tools.md)", file=sys.stderr)
        return 2
