"""`modelplane completion bash|zsh|tcsh`: a shell completion script for every command and flag,
generated from the commands' own parsers by shtab (so it never lists a flag a command lacks).

    eval "$(modelplane completion bash)"                                   # this shell
    modelplane completion bash > ~/.local/share/bash-completion/completions/modelplane
"""

from __future__ import annotations

import argparse
import sys

from modelplane.commands.parsers import Subparsers

SHELLS = ("bash", "zsh", "tcsh")
# Arguments whose values are paths: completed as files (directories included) by the shell.
PATH_METAVARS = ("MANIFEST_DIR", "OUT_DIR", "FILE", "KUBECONFIG_DIR", "DIR")


def add_parser(subparsers: Subparsers) -> None:
    p = subparsers.add_parser(
        "completion", help="print a shell completion script (bash, zsh or tcsh)",
        description='Print a completion script for the shell: `eval "$(modelplane completion bash)"` in '
                    "~/.bashrc, or save it where the shell loads completions from.")
    p.add_argument("shell", choices=SHELLS)
    p.set_defaults(func=run)


def _mark_paths(parser: argparse.ArgumentParser, file_completion: object) -> None:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                _mark_paths(sub, file_completion)
        elif action.metavar in PATH_METAVARS:
            action.complete = file_completion  # type: ignore[attr-defined]  # shtab reads this attribute


def run(args: argparse.Namespace) -> int:
    # Deferred: only this command needs shtab, and it needs every command's parser.
    import shtab

    from modelplane.__main__ import build_parser

    parser = build_parser()
    _mark_paths(parser, shtab.FILE)
    sys.stdout.write(shtab.complete(parser, shell=args.shell))
    return 0
