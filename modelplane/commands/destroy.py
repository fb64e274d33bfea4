"""`python -m modelplane destroy --stack NAME`: see modelplane/commands/stacks.py."""

from __future__ import annotations

from typing import Any

from modelplane.commands.stacks import add_verb


def add_parser(subparsers: Any) -> None:
    add_verb(subparsers, "destroy")
