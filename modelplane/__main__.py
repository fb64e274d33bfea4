"""`python -m modelplane <command>`: plan, render, lint, split, demo, sim, up, preview, destroy, verify,
reconcile."""

from __future__ import annotations

import argparse
import importlib
import sys

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
    sys.exit(main())
