"""Reading the placement JSON (`--previous`, the placement resource's state): one set of
field readers for every block of the document, so every malformed field is refused the
same way, naming its JSON path (`$.deployments[0].replicas[1].index`) and what was
expected. Numbers are bounded where they are read: `1e999` (infinity to `json`) or an
index of 10**70 is an error here, never an OverflowError or a 71-character label later.
"""

from __future__ import annotations

from typing import Final

from modelplane.json_types import JsonValue

# Where in the document a value sits, as a tuple of keys and indexes: formatted only
# when an error is raised, so reading 20,000 replicas builds no path strings.
Where = tuple[str | int, ...]

# A count nothing we write comes near (devices, replicas, plans): past it, a document is
# not ours, and the number is refused before anything computes with it.
MAX_COUNT = 10**9


class PlacementFormatError(ValueError):
    """A placement document does not follow the placement schema."""


class _Required:
    pass


REQUIRED: Final = _Required()


def at(where: Where) -> str:
    out = "$"
    for part in where:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


_KIND_NAMES: dict[type, str] = {str: "a string", int: "an integer", bool: "a boolean", list: "an array",
                                dict: "an object", float: "a number"}


def json_type(value: object) -> str:
    if value is None:
        return "null"
    return _KIND_NAMES.get(type(value), type(value).__name__)


def need(obj: JsonValue, key: str, kind: type, where: Where, default: JsonValue | _Required = REQUIRED) -> JsonValue:
    """`obj[key]`, of `kind` (bool is not an int); `default` when absent, if given."""
    if not isinstance(obj, dict):
        raise PlacementFormatError(f"{at(where)}: expected an object")
    if key not in obj:
        if default is REQUIRED:
            raise PlacementFormatError(f"{at(where)}: missing {key!r}")
        return default
    value = obj[key]
    # bool is an int subclass; an index or a count must not be true/false
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise PlacementFormatError(f"{at((*where, key))}: expected {_KIND_NAMES[kind]}, "
                                   f"got {json_type(value)}")
    return value


def count(obj: JsonValue, key: str, where: Where, default: JsonValue | _Required = REQUIRED, *,
          most: int = MAX_COUNT) -> int:
    """A whole number from 0 to `most`."""
    value = need(obj, key, int, where, default)
    if not 0 <= value <= most:
        shown = str(value) if len(str(value)) <= 20 else f"a {len(str(value))}-digit number"
        raise PlacementFormatError(f"{at((*where, key))}: expected a whole number from 0 to {most}, got {shown}")
    return int(value)


def optional_string(obj: JsonValue, key: str, where: Where) -> str | None:
    """A string, or null / absent."""
    value = obj.get(key) if isinstance(obj, dict) else None
    if value is not None and not isinstance(value, str):
        raise PlacementFormatError(f"{at((*where, key))}: expected a string or null, got {json_type(value)}")
    return value


def strings(value: JsonValue, where: Where) -> dict[str, str]:
    """An object whose values are strings."""
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise PlacementFormatError(f"{at(where)}: expected an object of strings")
    return value


def counts(value: JsonValue, where: Where, what: str) -> dict[str, int]:
    """An object whose values are whole numbers from 0 to MAX_COUNT (`what` names them)."""
    if not isinstance(value, dict):
        raise PlacementFormatError(f"{at(where)}: expected an object of {what}, got {json_type(value)}")
    return {str(k): count(value, k, where) for k in value}


def string_list(value: JsonValue, where: Where, what: str) -> list[str]:
    """An array of strings (`what` names them)."""
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise PlacementFormatError(f"{at(where)}: expected a list of {what}")
    return value
