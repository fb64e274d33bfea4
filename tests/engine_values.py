"""Values as the Pulumi engine hands them back: protobuf Structs carry every number as a
float (0 -> 0.0), so stack outputs, StackReferences and a provider's olds all do."""

from __future__ import annotations

from typing import Any


def through_the_engine(value: Any) -> Any:
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return float(value)
    if isinstance(value, dict):
        return {k: through_the_engine(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [through_the_engine(v) for v in value]
    return value
