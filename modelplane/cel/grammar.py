"""celpy's CEL parser, built once per user instead of once per process.

celpy analyses its LALR grammar with lark every time a process creates its first
Environment: about 0.1 s, a fifth of a 100-cluster `plan` at start-up. lark can cache that
analysis in a file (`Lark(cache=PATH)`); on load it checks the file against a digest of the
grammar, the options and lark's version, and rebuilds (and rewrites) it when they differ or
the file is unreadable, so a stale or torn cache costs one rebuild, never a wrong parser.

The file lives in the user's cache directory (`$XDG_CACHE_HOME/modelplane`, else
`~/.cache/modelplane`, created private), not in a shared temp directory: lark loads it with
pickle, so nobody else may be able to write it. Set MODELPLANE_CEL_CACHE=0 to build the
parser in memory only. celpy constructs the parser itself, with its own options; this module
only adds `cache=` to that one construction.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

import celpy
import celpy.celparser
import lark
from lark.load_grammar import Grammar

CACHE_ENV = "MODELPLANE_CEL_CACHE"


def cache_file() -> Path | None:
    """Where the parser cache lives, the directory created private; None when caching is off
    or the directory cannot be made (the parser is then built in memory, as celpy does)."""
    if os.environ.get(CACHE_ENV, "1") == "0":
        return None
    try:
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
        directory = base / "modelplane"
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = directory.stat()
    except (OSError, RuntimeError):   # no home directory, or none we may write
        return None
    if info.st_uid != os.getuid() or info.st_mode & 0o022:
        return None                   # someone else could plant the pickle lark would load
    return directory / f"cel-parser-lark-{lark.__version__}.cache"


class _CachingLark(lark.Lark):
    """lark.Lark with the cache file added to whatever options celpy passes."""

    cache_path = ""

    def __init__(self, grammar: Grammar | str | IO[str], **options: object) -> None:
        super().__init__(grammar, cache=self.cache_path, **options)


@contextmanager
def _lark_with_cache(path: Path) -> Iterator[None]:
    """celpy's `Lark(...)` call (celpy looks the name up in its module when it builds the
    parser), with `cache=path` added, for the duration of the block."""
    names = celpy.celparser.__dict__
    original = names["Lark"]
    _CachingLark.cache_path = str(path)
    names["Lark"] = _CachingLark
    try:
        yield
    finally:
        names["Lark"] = original


def environment(runner_class: type[celpy.InterpretedRunner]) -> celpy.Environment:
    """`celpy.Environment(runner_class=...)`, its parser loaded from the cache when there is one."""
    path = None if celpy.celparser.CELParser.CEL_PARSER is not None else cache_file()
    if path is None:
        return celpy.Environment(runner_class=runner_class)
    with _lark_with_cache(path):
        return celpy.Environment(runner_class=runner_class)
