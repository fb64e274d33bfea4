"""`python -m modelplane <command>`: plan, render, lint, split, demo, sim, up, preview, destroy, verify,
reconcile."""

from __future__ import annotations

import argparse
import gc
import importlib
import sys

# Commands that hold nothing open once they return (no process, file or socket a finalizer
# would still close): the interpreter's last collection at exit is skipped for them.
FINISHED_ON_RETURN = ("plan",)
COMMANDS = ("plan", "render", "lint", "split", "demo", "sim", "up", "preview", "destroy", "verify", "reconcile")
# The module of modelplane.commands behind a verb whose name would mislead as a module name:
# `split` sends traffic split across the routes; "split" elsewhere means a fleet split into stacks.
MODULES = {"split": "traffic"}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """Every command's parser, or only `command`'s: each command module imports what it runs
    (the kube client, the sim, the Automation API), which `plan` should not pay for at start-up
    (`plan` of a large fleet is measured from process start, benchmarks/scale_plan.py)."""
    parser = argparse.ArgumentParser(prog="python -m modelplane", description=__doc__)
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in (command,) if command in COMMANDS else COMMANDS:
        importlib.import_module(f"modelplane.commands.{MODULES.get(name, name)}").add_parser(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser(argv[0] if argv else None).parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    code = main()
    if sys.argv[1:2] and sys.argv[1] in FINISHED_ON_RETURN:
        # The collection at exit would scan every object still alive (the loaded modules,
        # pydantic's and CEL's tables) only for the process to end: ~0.1 s of `plan`, a
        # third of what parsing the fleet costs. Frozen objects are left to the exit.
        gc.freeze()
    sys.exit(code)
