"""File inputs the commands share: JSON files, observed pool sizes, a previous placement."""

from __future__ import annotations

import json
from typing import Any


def read_json(path: str, what: str) -> Any:
    """The parsed file; a ValueError naming `what` and the path when it can't be read or parsed."""
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except OSError as exc:
        raise ValueError(f"cannot read {what} {path}: {exc.strerror or exc}") from exc
    except json.JSONDecodeError as exc:
        raise ValueError(f"{what} {path} is not valid JSON: {exc}") from exc


def read_observed(path: str, what: str = "observed capacity") -> dict[str, dict[str, int]]:
    """`{"cluster": {"pool": nodes}}` with integer node counts."""
    data = read_json(path, what)
    ok = isinstance(data, dict) and all(
        isinstance(pools, dict) and all(isinstance(n, int) and not isinstance(n, bool) for n in pools.values())
        for pools in data.values())
    if not ok:
        raise ValueError(f'{what} {path} must look like {{"cluster": {{"pool": 3}}}}')
    return data


def read_previous(path: str) -> Any:
    """A previous placement (the `plan --json` schema); PlacementFormatError when malformed."""
    from modelplane.scheduler import FleetPlacement

    return FleetPlacement.from_json(read_json(path, "previous placement"))
