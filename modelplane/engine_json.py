"""JSON values that went through the Pulumi engine, which carries them as protobuf
`Struct`s: every number comes back a float (0 -> 0.0). One home for turning them back."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping

from modelplane.json_types import JsonValue


def normalize_numbers(value: JsonValue) -> JsonValue:
    """Integral floats become ints, through mappings (rebuilt as dicts) and lists; anything
    else (strings, bools, the SDK's Unknown sentinel) is kept as it is."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, Mapping):
        return {k: normalize_numbers(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [normalize_numbers(v) for v in value]
    return value


def digest(value: JsonValue) -> str:
    """A digest of a JSON value that is the same before and after the engine (numbers
    normalized, keys sorted): what a stack keeps instead of a second copy of the value."""
    text = json.dumps(normalize_numbers(value), sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:32]
