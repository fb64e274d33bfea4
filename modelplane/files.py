"""Reading a file named from outside (a flag, a kubeconfig, a stack setting) within a bound: only
regular files (a FIFO, /dev/zero or a directory is refused before any byte is read), at most
`limit` bytes (the size is checked before reading: an 8 GB sparse file is not read), opened
without blocking (a FIFO with no writer cannot stall the read). The one rule every reader of such
a file uses (`split --api-key file:`, `plan --metrics`, the JSON inputs, modelplane.kube.files)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from modelplane.redact import outside_text


class FileReadError(ValueError):
    """Why the file could not be read; names it, never quotes its content."""


def shown(path: Path | str) -> str:
    """A path as messages print it (a file name may hold anything)."""
    return outside_text(str(path), limit=200)


def read_regular_file(path: Path | str, what: str, limit: int) -> bytes:
    """The bytes of a regular file of at most `limit` bytes; FileReadError naming `what` and the
    file otherwise."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    except (OSError, ValueError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
        raise FileReadError(f"cannot read {what} {shown(path)}: {why}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise FileReadError(f"{what} {shown(path)} is not a regular file (a device, FIFO or directory cannot "
                                "hold one)")
        if info.st_size > limit:
            raise FileReadError(f"{what} {shown(path)} is larger than {limit} bytes")
        chunks, size = [], 0
        while size <= limit:
            try:
                chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            except BlockingIOError:
                raise FileReadError(f"{what} {shown(path)} could not be read without waiting") from None
            except OSError as exc:
                raise FileReadError(f"cannot read {what} {shown(path)}: {exc.strerror or exc}") from None
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:
            raise FileReadError(f"{what} {shown(path)} is larger than {limit} bytes")
        return b"".join(chunks)
    finally:
        os.close(fd)


__all__ = ["FileReadError", "read_regular_file", "shown"]
