"""Reading a JSON file given from outside (a previous placement, observed counts, a metrics
file): bounded in bytes and depth (modelplane/limits.py), a regular file only and never
blocking (modelplane.files), UTF-8, no key given twice in an object, and a ValueError that
names what the file is for and its path, never quoting its content and never a traceback."""

from __future__ import annotations

import json

from modelplane.api.common import quoted
from modelplane.files import FileReadError, read_regular_file
from modelplane.json_types import JsonValue
from modelplane.limits import MAX_JSON_DEPTH, MAX_JSON_FILE_BYTES


def _read_bytes(path: str, what: str) -> bytes:
    # A regular file only (a FIFO with no writer used to hang `plan --metrics` for ever).
    try:
        return read_regular_file(path, what, MAX_JSON_FILE_BYTES)
    except FileReadError as exc:
        raise ValueError(f"{exc} (see modelplane/limits.py)" if "larger than" in str(exc) else str(exc)) from None


class _DuplicateKey(ValueError):
    pass


def _unique_keys(pairs: list[tuple[str, JsonValue]]) -> dict[str, JsonValue]:
    """json's object hook that refuses a key given twice (json.loads keeps the last silently)."""
    out: dict[str, JsonValue] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


def _depth_exceeds(value: JsonValue, limit: int) -> bool:
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: JsonValue = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return False


def read_json(path: str, what: str) -> JsonValue:
    """The parsed file; a ValueError naming `what` and the path when it can't be read or parsed."""
    data = _read_bytes(path, what)
    too_deep = f"{what} {path} nests objects and arrays more than {MAX_JSON_DEPTH} levels deep"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ValueError(f"{what} {path} is not UTF-8 text (byte 0x{data[exc.start]:02x} on line {line})") from None
    try:
        value = json.loads(text, object_pairs_hook=_unique_keys)
    except _DuplicateKey as exc:
        raise ValueError(f"{what} {path} has the key {quoted(str(exc.args[0]))} twice in one object; "
                         "keep one (JSON keeps the last without a word)") from None
    except json.JSONDecodeError as exc:
        # exc.msg and the position only: the message never quotes the file's content.
        raise ValueError(f"{what} {path} is not valid JSON: {exc.msg} (line {exc.lineno}, "
                         f"column {exc.colno})") from None
    except RecursionError:
        # The C decoder stops at the interpreter's recursion limit before MAX_JSON_DEPTH
        # could be checked on the result.
        raise ValueError(too_deep) from None
    except ValueError as exc:   # e.g. a number past Python's 4,300-digit conversion limit
        raise ValueError(f"{what} {path} is not valid JSON: {exc}") from None
    if _depth_exceeds(value, MAX_JSON_DEPTH):
        raise ValueError(too_deep)
    return value
