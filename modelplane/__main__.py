"""`modelplane <command>` (or `python -m modelplane <command>`): plan, explain, render, lint, split,
demo, sim, up, preview, destroy, verify, reconcile, completion."""

from __future__ import annotations

import argparse
import gc
import importlib
import os
import sys

# Commands that hold nothing open once they return (no process, file or socket a finalizer
# would still close): the interpreter's last collection at exit is skipped for them.
FINISHED_ON_RETURN = ("plan", "explain")
COMMANDS = ("plan", "explain", "render", "lint", "split", "demo", "sim", "up", "preview", "destroy", "verify",
            "reconcile", "completion", "replay")
# The module of modelplane.commands behind a verb whose name would mislead as a module name:
# `split` sends traffic split across the routes; "split" elsewhere means a fleet split into stacks.
MODULES = {"split": "traffic"}
# The name usage lines give the program: the console script's (pyproject.toml), or how
# `python -m` ran it.
PROG = "modelplane"
MODULE_PROG = "python -m modelplane"


def build_parser(command: str | None = None, prog: str = PROG) -> argparse.ArgumentParser:
    """Every command's parser, or only `command`'s: each command module imports what it runs
    (the kube client, the sim, the Automation API), which `plan` should not pay for at start-up
    (`plan` of a large fleet is measured from process start, benchmarks/scale_plan.py)."""
    parser = argparse.ArgumentParser(prog=prog, description=__doc__)
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in (command,) if command in COMMANDS else COMMANDS:
        importlib.import_module(f"modelplane.commands.{MODULES.get(name, name)}").add_parser(subparsers)
    return parser


def parse(argv: list[str], prog: str = PROG) -> argparse.Namespace:
    """The command line, parsed; a flag the command does not know is reported with that
    command's own usage (argparse reports it with the top-level one: "usage: modelplane
    [-h] COMMAND ...", which says nothing of the flags the command has)."""
    parser = build_parser(argv[0] if argv else None, prog)
    args, extra = parser.parse_known_args(argv)
    if extra:
        command = _command_parser(parser, args.command)
        (command or parser).error(f"unrecognized arguments: {' '.join(extra)}")
    return args


def _command_parser(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser | None:
    for action in parser._actions:    # argparse keeps its subcommands' parsers only here
        if isinstance(action, argparse._SubParsersAction):
            found: argparse.ArgumentParser | None = action.choices.get(name)
            return found
    return None


def main(argv: list[str] | None = None, prog: str = PROG) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse(argv, prog)
    try:
        return int(args.func(args) or 0)
    except BrokenPipeError:
        # `modelplane explain ... | head` closed the pipe early: not an error of the command, and
        # no traceback (nor a second one when the interpreter flushes stdout at exit).
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def _exit(code: int) -> None:
    if sys.argv[1:2] and sys.argv[1] in FINISHED_ON_RETURN:
        # The collection at exit would scan every object still alive (the loaded modules,
        # pydantic's and CEL's tables) only for the process to end: ~0.1 s of `plan`, a
        # third of what parsing the fleet costs. Frozen objects are left to the exit.
        gc.freeze()
    sys.exit(code)


def console() -> None:
    """The `modelplane` console script (pyproject.toml [project.scripts])."""
    _exit(main())


if __name__ == "__main__":
    _exit(main(prog=MODULE_PROG))
