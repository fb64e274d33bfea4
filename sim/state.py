"""The sim's state directory as it is read back: whatever is on disk (a symlinked directory,
a `sim.json` that is a list, a string, lacks `pid` or `kubeconfig`, has `pid: "abc"` or ports
that are not integers), the result is the validated record or a SimError that says what is
wrong, never a traceback; and nothing is removed or signalled on the strength of a file that
does not prove it was written by `sim up` (the marker file, a regular file in a real
directory)."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

from modelplane.redact import outside_text

from .errors import SimError

MARKER = ".modelplane-sim"
STATE_FILE = "sim.json"
MAX_STATE_BYTES = 16 * 1024 * 1024
PROCESS_FIELDS = {"name": str, "pid": int, "start": str, "log": str, "argv0": str}


def _lstat(path: Path) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise SimError(f"cannot inspect {path}: {exc.strerror or exc}") from None


def check_directory(state_dir: Path) -> bool:
    """Whether the state directory exists; SimError when it is a symlink or not a directory
    (the sim never works through a symlink: `sim down` would remove its target)."""
    info = _lstat(state_dir)
    if info is None:
        return False
    if stat.S_ISLNK(info.st_mode):
        raise SimError(f"--state-dir {state_dir} is a symlink; the sim does not follow it. Pass the real directory")
    if not stat.S_ISDIR(info.st_mode):
        raise SimError(f"--state-dir {state_dir} is not a directory, so it is not a sim state directory; "
                       "pass the --state-dir that `sim up` used")
    return True


def is_ours(state_dir: Path) -> bool:
    """The marker `sim up` writes first is there, as a regular file."""
    info = _lstat(state_dir / MARKER)
    return info is not None and stat.S_ISREG(info.st_mode)


def read_state(state_dir: Path) -> dict[str, Any] | None:
    """The validated `sim.json`, or None when there is none."""
    if not check_directory(state_dir):
        return None
    path = state_dir / STATE_FILE
    info = _lstat(path)
    if info is None:
        return None
    broken = (f"{path} is not a sim state written by `sim up`" if not is_ours(state_dir) else
              f"{path} is damaged")
    if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_STATE_BYTES:
        raise SimError(f"{broken} (not a regular file of at most {MAX_STATE_BYTES} bytes); nothing was stopped")
    try:
        with open(path, "rb") as fh:
            data = json.loads(fh.read(MAX_STATE_BYTES + 1))
    except (OSError, ValueError, RecursionError) as exc:
        raise SimError(f"{broken} ({type(exc).__name__}); nothing was stopped") from None
    problem = _problem(data)
    if problem:
        raise SimError(f"{broken}: {problem}; nothing was stopped")
    return data  # type: ignore[no-any-return]  # checked by _problem


def _problem(data: Any) -> str | None:
    if not isinstance(data, dict):
        return f"expected an object, found {type(data).__name__}"
    clusters = data.get("clusters", {})
    if not isinstance(clusters, dict):
        return "clusters is not an object"
    for name, cluster in clusters.items():
        where = f"clusters.{outside_text(name, limit=60)}"
        if not isinstance(cluster, dict):
            return f"{where} is not an object"
        for key in ("kubeconfig", "server"):
            if not isinstance(cluster.get(key), str):
                return f"{where}.{key} is missing or not text"
        ports = cluster.get("ports", {})
        if not isinstance(ports, dict) or not all(_int(p) and 0 < p < 65536 for p in ports.values()):
            return f"{where}.ports must map roles to port numbers"
        processes = cluster.get("processes", [])
        if not isinstance(processes, list):
            return f"{where}.processes is not a list"
        for i, rec in enumerate(processes):
            if not isinstance(rec, dict):
                return f"{where}.processes[{i}] is not an object"
            for key, kind in PROCESS_FIELDS.items():
                if not isinstance(rec.get(key), kind) or (kind is int and not _int(rec.get(key))):
                    return f"{where}.processes[{i}].{key} is missing or not {kind.__name__}"
            if rec["pid"] <= 1:
                return f"{where}.processes[{i}].pid is not a process the sim started"
    return None


def _int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
