"""Pure checks that turn Modelplane's silent failures into loud ones.

Shared by `python -m modelplane lint` and the CrossGuard pack in policy-packs/modelplane:
each policy is one module registering one function over a CheckContext, so both front
ends (and the tests) call the same code without a policy server.
"""

from __future__ import annotations  # noqa: I001  (the checks below register in this order)

from collections.abc import Iterable, Mapping
from modelplane.json_types import JsonMapping

from . import (  # noqa: F401  (importing registers the checks, in this order)
    usable_gpu_memory,
    published_attributes,
    cache_revision,
    nixl,
    fabric,
    pcie_alignment,
    replicas_scheduled,
    pool_label,
    declared_capacity,
    kind_node_image,
    kind_node_digest,
    cloud_pools,
    modelexpress,
    sglang,
    secrets,
    gateway_exposure,
    variables,
    references,
)
from modelplane.api import Fleet
from modelplane.scheduler import DEFAULT_ACCOUNTING, FleetPlacement, place_fleet

from .context import CheckContext, ProgramResource
from .findings import ADVISORY, DISABLED, LEVELS, MANDATORY, Finding
from .registry import CHECKS, Check

__all__ = [
    "ADVISORY", "CHECKS", "Check", "CheckContext", "DISABLED", "Finding", "LEVELS", "MANDATORY",
    "PACK_ONLY_POLICIES", "ProgramResource", "levels_from_config", "place", "run_check", "run_checks",
]

# Policies only the CrossGuard pack has: they look at the Pulumi stack, not at manifests.
# A config file shared by `lint --config` and `--policy-pack-config` may name them.
PACK_ONLY_POLICIES = ("modelplane-fleet-present",)


def place(fleet: Fleet, observed: Mapping[str, Mapping[str, int]] | None = None,
          accounting: str = DEFAULT_ACCOUNTING) -> FleetPlacement:
    return place_fleet(fleet, accounting=accounting, observed=observed)


def _placement(fleet: Fleet, placement: FleetPlacement | JsonMapping | None,
               observed: Mapping[str, Mapping[str, int]] | None) -> FleetPlacement:
    if placement is None:
        return place(fleet, observed)
    if isinstance(placement, Mapping):
        return FleetPlacement.from_json(dict(placement))
    return placement


def levels_from_config(config: JsonMapping | None) -> dict[str, str]:
    """Levels from a --policy-pack-config style document: {"policy": "advisory"} or
    {"policy": {"enforcementLevel": "advisory", ...}}."""
    levels: dict[str, str] = {}
    for name, value in (config or {}).items():
        level = value.get("enforcementLevel") if isinstance(value, Mapping) else value
        if level is None:
            continue
        if name in PACK_ONLY_POLICIES:
            continue
        if name not in CHECKS:
            raise ValueError(f"unknown policy {name!r}; known: {', '.join(CHECKS)}")
        if level not in LEVELS:
            raise ValueError(f"policy {name!r}: enforcementLevel {level!r} is not one of {', '.join(LEVELS)}")
        levels[name] = level
    return levels


def run_check(name: str, ctx: CheckContext) -> list[Finding]:
    return list(CHECKS[name].run(ctx))


def run_checks(fleet: Fleet, placement: FleetPlacement | JsonMapping | None = None,
               observed: Mapping[str, Mapping[str, int]] | None = None,
               program: Iterable[ProgramResource] | None = None, *,
               levels: Mapping[str, str] | None = None,
               options: Mapping[str, JsonMapping] | None = None) -> list[Finding]:
    """Every finding of every enabled check, in registry order, at its effective level.

    `placement` is a FleetPlacement or its JSON; None places the fleet here (declared
    capacity, or `observed` pool sizes where given)."""
    ctx = CheckContext(fleet, _placement(fleet, placement, observed), observed,
                       list(program or []), options or {})
    findings: list[Finding] = []
    for name, check in CHECKS.items():
        level = (levels or {}).get(name, check.level)
        if level == DISABLED:
            continue
        findings.extend(f.with_level(level) for f in check.run(ctx))
    return findings
