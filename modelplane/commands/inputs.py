"""File inputs the commands share: JSON files, observed pool sizes, a previous placement.

Every reader bounds what it reads (modelplane/limits.py; regular files only, never blocking:
modelplane.files), refuses a key given twice in an object, and fails with a ValueError that
names what the file is for and its path: never a traceback, whatever the bytes. The JSON
reader itself is modelplane.json_files' (the placement provider reads a metrics file with
it too: modelplane.autoscale.readings.read_metrics_file).
"""

from __future__ import annotations

from modelplane.api import Fleet
from modelplane.gcpause import gc_paused
from modelplane.json_files import read_json
from modelplane.json_types import JsonValue
from modelplane.references import observed_problems
from modelplane.scheduler import FleetPlacement, PlacementFormatError

__all__ = ["OBSERVED_SHAPE", "observed_counts", "read_json", "read_observed", "read_previous"]

OBSERVED_SHAPE = '{"cluster": {"pool": 3}} with a whole, non-negative number of nodes per pool'


def observed_counts(data: JsonValue, where: str) -> dict[str, dict[str, int]]:
    """Observed node counts, the one rule `plan` and `lint` share: an object of clusters,
    each an object of pools, each a whole number >= 0."""
    if not isinstance(data, dict):
        raise ValueError(f"{where} must look like {OBSERVED_SHAPE}")
    for cluster, pools in data.items():
        if not isinstance(pools, dict):
            raise ValueError(f"{where}: cluster {cluster!r} must map pool names to node counts; "
                             f"expected {OBSERVED_SHAPE}")
        for pool, nodes in pools.items():
            if isinstance(nodes, bool) or not isinstance(nodes, int) or nodes < 0:
                raise ValueError(f"{where}: {cluster}.{pool} is not a whole number of nodes >= 0; "
                                 f"expected {OBSERVED_SHAPE}")
    return data


def read_observed(path: str, what: str = "observed capacity", fleet: Fleet | None = None) -> dict[str, dict[str, int]]:
    """`{"cluster": {"pool": nodes}}` with whole, non-negative node counts; with `fleet`, every
    cluster and pool one of the fleet's (a misspelt one would never be read)."""
    counts = observed_counts(read_json(path, what), f"{what} {path}")
    problems = observed_problems(counts, fleet) if fleet is not None else []
    if problems:
        raise ValueError(f"{what} {path} names what the fleet does not have, so its size would never be read: "
                         + "; ".join(problems))
    return counts


def read_previous(path: str) -> FleetPlacement:
    """A previous placement (the `plan --json` schema); ValueError naming the file when malformed."""
    with gc_paused():
        data = read_json(path, "previous placement")
        try:
            return FleetPlacement.from_json(data)
        except PlacementFormatError as exc:
            raise ValueError(f"previous placement {path} is not a placement (the `plan --json` output): "
                             f"{exc}") from None
