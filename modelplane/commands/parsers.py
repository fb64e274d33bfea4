"""The type every command's `add_parser(subparsers)` receives from `python -m modelplane`."""

from __future__ import annotations

import argparse

# What ArgumentParser.add_subparsers() returns (typeshed's name for it; argparse exports none).
Subparsers = argparse._SubParsersAction[argparse.ArgumentParser]
