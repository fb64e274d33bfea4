"""What the commands share about their output and their `-` arguments (kubectl's conventions):

* `-o/--output json|yaml|wide` (and `--json`, kept as the older spelling of `-o json`);
* `-` for MANIFEST_DIR reads the manifests from stdin, bounded like a file
  (modelplane.api.load_manifest_bytes); `-` for OUT_DIR writes to stdout (`render`);
* colour only on a terminal, never with NO_COLOR set (https://no-color.org) or TERM=dumb.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import TextIO

import yaml

from modelplane.api import Fleet, load_manifest_bytes, load_manifests
from modelplane.json_types import JsonValue
from modelplane.limits import MAX_MANIFEST_FILE_BYTES

STDIO = "-"
JSON, YAML, WIDE = "json", "yaml", "wide"
FORMATS = (JSON, YAML, WIDE)
STDIN_SOURCE = "<stdin>"


def add_output(p: argparse.ArgumentParser, formats: tuple[str, ...] = FORMATS, *, json_flag: bool = True,
               what: str = "the result") -> None:
    p.add_argument("-o", "--output", choices=formats, metavar="|".join(formats), default=None,
                   help=f"print {what} as {', '.join(formats)} instead of the table (json and yaml carry the same "
                        "document)")
    if json_flag:
        p.add_argument("--json", dest="output", action="store_const", const=JSON,
                       help="the same as -o json")


def add_manifests(p: argparse.ArgumentParser) -> None:
    p.add_argument("manifests", metavar="MANIFEST_DIR", help="manifest file or directory; - reads them from stdin")


def load_fleet(path: str, stdin: TextIO | None = None) -> Fleet:
    """The fleet in `path`, or on stdin for `-`; ManifestError (a ValueError) as for files."""
    if path != STDIO:
        return load_manifests(path)
    stream = stdin or sys.stdin
    data = stream.buffer.read(MAX_MANIFEST_FILE_BYTES + 1)
    return load_manifest_bytes(data, STDIN_SOURCE)


def dump(data: JsonValue, fmt: str, *, compact: bool = False) -> str:
    """`data` as JSON (indented, or on one line with `compact`) or YAML, ending in a newline."""
    if fmt == YAML:
        # Through JSON first: the YAML document is then exactly the JSON one (json writes a str
        # subclass as a string, where PyYAML's safe dumper refuses to represent it).
        plain = json.loads(json.dumps(data))
        return yaml.safe_dump(plain, sort_keys=False, default_flow_style=False, allow_unicode=True, width=1 << 16)
    if compact:
        return json.dumps(data, separators=(",", ":")) + "\n"
    return json.dumps(data, indent=2) + "\n"


def use_colour(stream: TextIO) -> bool:
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
