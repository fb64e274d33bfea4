"""The type every command's `add_parser(subparsers)` receives from `python -m modelplane`."""

from __future__ import annotations

import argparse
from typing import TypeAlias

# What ArgumentParser.add_subparsers() returns (typeshed's name for it; argparse exports
# none, and the class is not subscriptable at run time, hence the string).
Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"
