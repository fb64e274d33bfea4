"""`python -m modelplane <command>`: plan, render, lint, split, demo, sim, up, preview, destroy, verify,
reconcile."""

from __future__ import annotations

import argparse
import importlib
import sys

COMMANDS = ("plan", "render", "lint", "split", "demo", "sim", "up", "preview", "destroy", "verify", "reconcile")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m modelplane", description=__doc__)
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"modelplane.commands.{name}").add_parser(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
