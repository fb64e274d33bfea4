"""File inputs the commands share: JSON files, observed pool sizes, a previous placement.

Every reader bounds what it reads (modelplane/limits.py) and fails with a ValueError that
names what the file is for and its path: never a traceback, whatever the bytes.
"""

from __future__ import annotations

import json

from modelplane.api import Fleet
from modelplane.api.common import check_dns_label, check_dns_subdomain, quoted
from modelplane.gcpause import gc_paused
from modelplane.json_types import JsonValue
from modelplane.limits import MAX_JSON_DEPTH, MAX_JSON_FILE_BYTES, MAX_METRICS_FILE_DEPLOYMENTS
from modelplane.references import observed_problems
from modelplane.scheduler import FleetPlacement, PlacementFormatError

OBSERVED_SHAPE = '{"cluster": {"pool": 3}} with a whole, non-negative number of nodes per pool'


def _read_bytes(path: str, what: str) -> bytes:
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_JSON_FILE_BYTES + 1)
    except OSError as exc:
        raise ValueError(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    if len(data) > MAX_JSON_FILE_BYTES:
        raise ValueError(f"{what} {path} is larger than {MAX_JSON_FILE_BYTES} bytes (see modelplane/limits.py)")
    return data


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
        value = json.loads(text)
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


METRICS_SHAPE = '{"<namespace>/<deployment>": {"QueueDepth": 4.5, ...}} with a number per metric type'


def metric_values(data: JsonValue, where: str) -> dict[tuple[str, str], dict[str, float]]:
    """`plan --metrics`: per deployment, the average per ready replica of each metric type,
    each a finite number within its type's bound (modelplane.autoscale.readings.check_value)."""
    # Deferred: the autoscale package is only for --metrics.
    from modelplane.autoscale.readings import check_value

    if not isinstance(data, dict):
        raise ValueError(f"{where} must look like {METRICS_SHAPE}")
    if len(data) > MAX_METRICS_FILE_DEPLOYMENTS:
        raise ValueError(f"{where} names {len(data)} deployments; at most {MAX_METRICS_FILE_DEPLOYMENTS} "
                         "(see modelplane/limits.py)")
    out: dict[tuple[str, str], dict[str, float]] = {}
    for key, values in data.items():
        namespace, slash, name = key.partition("/")
        try:
            if not slash:
                raise ValueError("it has no '/'")
            check_dns_label(namespace, "namespace")
            check_dns_subdomain(name, "deployment name")
        except ValueError as exc:
            raise ValueError(f"{where}: key {quoted(key)} is not \"<namespace>/<deployment>\" ({exc})") from None
        if not isinstance(values, dict):
            raise ValueError(f"{where}: {key} must map metric types to numbers; expected {METRICS_SHAPE}")
        out[(namespace, name)] = {t: check_value(t, v, f"{where}: {key}.{quoted(t)}") for t, v in values.items()}
    return out


def read_metrics(path: str, what: str = "metrics file") -> dict[tuple[str, str], dict[str, float]]:
    """`{"<namespace>/<deployment>": {"<metric type>": <average per ready replica>}}`."""
    return metric_values(read_json(path, what), f"{what} {path}")
