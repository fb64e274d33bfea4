"""`python -m modelplane destroy --stack NAME`: see modelplane/commands/stacks.py."""

from __future__ import annotations

from modelplane.commands.parsers import Subparsers
from modelplane.commands.stacks import add_verb


def add_parser(subparsers: Subparsers) -> None:
    add_verb(subparsers, "destroy")
