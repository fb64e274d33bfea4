"""Reading a file a kubeconfig names (or the kubeconfig itself) within a bound: modelplane.files'
rule (regular files only, at most `limit` bytes, never blocking), its errors as ConfigError
naming the kubeconfig that named the file."""

from __future__ import annotations

from pathlib import Path

from modelplane.files import FileReadError, read_regular_file, shown

from .errors import ConfigError


def read_bounded(path: Path, what: str, where: str, limit: int) -> bytes:
    """The bytes of a regular file of at most `limit` bytes; ConfigError naming `what` and
    the file (and `where`, the kubeconfig that named it) otherwise."""
    try:
        return read_regular_file(path, what, limit)
    except FileReadError as exc:
        raise ConfigError(f"{where}: {exc}" if where else str(exc)) from None


__all__ = ["read_bounded", "shown"]
