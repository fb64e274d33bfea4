"""`up`, `preview`, `destroy`: run a fleet's stacks, split or not, with the Pulumi
Automation API (automation/split.py; docs/pulumi-program.md, "Split stacks")."""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path
from types import FrameType

from modelplane.commands.parsers import Subparsers
from modelplane.processes import handling

PROJECT = Path(__file__).resolve().parents[2]
HELP = {
    "up": "apply the fleet stack, then its shard stacks in parallel",
    "preview": "preview the fleet stack (the placement dry-run), then what each shard stack the change may "
               "reach would change",
    "destroy": "destroy the shard stacks, then the fleet stack",
}


def add_verb(subparsers: Subparsers, verb: str) -> None:
    p = subparsers.add_parser(verb, help=HELP[verb], description=HELP[verb] + ". A stack without a `split` "
                              "config block is a one-stack fleet and runs alone. Needs the pulumi CLI on PATH "
                              "(docs/engine-tools.md).")
    p.add_argument("--stack", required=True, help="the fleet stack (its config: stacks/Pulumi.<stack>.yaml)")
    p.add_argument("--parallel", type=int, default=2, metavar="N", help="shard stacks at once (default 2)")
    p.add_argument("--cwd", default=str(PROJECT), help="the Pulumi project directory (default: this checkout)")
    p.add_argument("--verbose", action="store_true", help="print every stack's output, not only failures")
    if verb == "up":
        p.add_argument("--skip-checkpoints", action="store_true",
                       help="save each stack's state once at the end instead of after every step "
                            "(faster for large stacks; an interrupted up then needs `pulumi refresh`)")
    if verb == "preview":
        p.add_argument("--every-shard", action="store_true",
                       help="preview every shard stack, also those the plan diff proves unchanged")
    if verb == "destroy":
        p.add_argument("--remove", action="store_true", help="also remove the emptied shard stacks")
    p.set_defaults(func=run, verb=verb)


def _interrupt(signum: int, _frame: FrameType | None) -> None:
    raise KeyboardInterrupt(signum)


def run(args: argparse.Namespace) -> int:
    if args.parallel < 1:
        print("error: --parallel must be at least 1", file=sys.stderr)
        return 2
    # The driver needs the Pulumi SDK, which modelplane's core never imports: imported
    # here, when one of these commands runs, not when the CLI starts.
    from automation.split import DriverError, SplitFleet

    try:
        fleet = SplitFleet(Path(args.cwd), args.stack, parallel=args.parallel, out=sys.stdout, verbose=args.verbose,
                           skip_checkpoints=getattr(args, "skip_checkpoints", False),
                           every_shard=getattr(args, "every_shard", False))
    except FileNotFoundError:
        print("error: no `pulumi` on PATH: install the Pulumi CLI, or `eval \"$(scripts/engine-env)\"` "
              "(docs/engine-tools.md)", file=sys.stderr)
        return 2
    # SIGINT stays Python's KeyboardInterrupt; the handlers stay in place while stop_all runs.
    with handling(_interrupt, (signal.SIGTERM, signal.SIGHUP)):
        try:
            if args.verb == "up":
                ok = fleet.up()
            elif args.verb == "preview":
                ok = fleet.preview()
            else:
                ok = fleet.destroy(remove=args.remove)
        except DriverError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        except KeyboardInterrupt as exc:
            signum = exc.args[0] if exc.args and isinstance(exc.args[0], int) else signal.SIGINT
            print(f"\ninterrupted: stopping the running pulumi processes (signal {signum})", file=sys.stderr)
            fleet.command.stop_all()
            return 128 + int(signum)
    return 0 if ok else 1
