"""The fleet-wide placement as a Pulumi dynamic resource.

`check()` runs the scheduler, so the placement is an input of the resource and is
known during `pulumi preview` (pulumi-notes A5); the previous checked inputs (`olds`)
carry the replicas that already exist, so they stay put across runs. The class is
pickled by reference (this module is imported inside the provider process), hence: no
pulumi.Config, no captured Outputs, nothing done at import time.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pulumi
from pulumi.dynamic import (
    CheckFailure,
    CheckResult,
    CreateResult,
    DiffResult,
    ReadResult,
    Resource,
    ResourceProvider,
    UpdateResult,
)
from pulumi.output import Unknown

from modelplane.engine_json import digest
from modelplane.engine_json import normalize_numbers as normalize_numbers  # one home; re-exported for tests
from providers.autoscale import AUTOSCALE_KEY, AUTOSCALING_KEY, autoscaled_outputs
from providers.observe import OBSERVE_KEY, OUTPUT_KEYS, observed_outputs, unreadable_placement

# Inputs that decide the placement; any change to them may move nothing but is an update.
DRIVING_KEYS = ("fleet", "accounting", "observed", OBSERVE_KEY, AUTOSCALE_KEY)
# What check() adds besides the placement, each compared by diff().
STATE_KEYS = (*OUTPUT_KEYS, AUTOSCALING_KEY)
# The outputs keep the fleet's digest, not a second copy of every manifest (the inputs
# hold them once, for check() and the policies): state grows with what people read back.
FLEET_DIGEST = "fleetDigest"
_UNKNOWN_TOKEN = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"  # the engine's unknown sentinel


def contains_unknown(value: Any) -> bool:
    if isinstance(value, Unknown) or value == _UNKNOWN_TOKEN:
        return True
    if isinstance(value, Mapping):
        return any(contains_unknown(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(contains_unknown(v) for v in value)
    return False


def replica_keys(placement: Mapping[str, Any] | None) -> set[tuple[str, str, int]]:
    """(namespace/deployment, cluster, index) for every placed replica."""
    keys: set[tuple[str, str, int]] = set()
    for dep in (placement or {}).get("deployments", []) or []:
        ident = f"{dep['namespace']}/{dep['name']}"
        for rep in dep.get("replicas", []) or []:
            keys.add((ident, rep["cluster"], int(rep["index"])))
    return keys


def _rows(keys: set[tuple[str, str, int]]) -> list[list[str | int]]:
    return [list(k) for k in sorted(keys)]


def replica_changes(old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> dict[str, list[list[str | int]]]:
    """Which replicas a new placement adds, keeps and removes relative to the old one."""
    before, after = replica_keys(old), replica_keys(new)
    return {"added": _rows(after - before), "kept": _rows(after & before), "removed": _rows(before - after)}


def _manifest_failures(exc: Exception) -> list[CheckFailure]:
    issues = getattr(exc, "issues", None)
    if not issues:
        return [CheckFailure("fleet", f"invalid fleet: {exc}")]
    out = []
    for issue in issues:
        where = f"{issue.file}#{issue.index} {issue.kind}/{issue.name}"
        field = f" {issue.path}" if getattr(issue, "path", "") else ""
        out.append(CheckFailure("fleet", f"{where}{field}: {issue.message}"))
    return out


def compute_placement(olds: Mapping[str, Any], news: Mapping[str, Any], now: float | None = None
                      ) -> tuple[dict[str, Any] | None, list[CheckFailure]]:
    """({"placement": JSON} plus, with an `observe` input, what was observed; failures).
    Without `observe` pure: the same olds and news give the same answer, which `pulumi up`
    relies on (check runs in its preview and again in its update). With it, the clusters
    read and `now` (the check's time, injectable) are inputs too (providers/observe.py)."""
    # Deferred on purpose: the provider process imports this module to start serving, and
    # the core (pydantic models, the scheduler) loads only when a placement is computed.
    from modelplane.api import load_documents
    from modelplane.scheduler import ACCOUNTING_MODES, DEFAULT_ACCOUNTING, FleetPlacement, place_fleet

    accounting = news.get("accounting") or DEFAULT_ACCOUNTING
    if accounting not in ACCOUNTING_MODES:
        return None, [CheckFailure("accounting", f"accounting must be one of {ACCOUNTING_MODES}, got {accounting!r}")]
    try:
        fleet = load_documents(list(news.get("fleet") or []), source="<inputs>")
    except Exception as exc:  # noqa: BLE001 - ManifestError, or anything a malformed document raises: a check failure
        return None, _manifest_failures(exc)
    previous = None
    old_placement = olds.get("placement") if olds else None
    if old_placement and not contains_unknown(old_placement):
        try:
            previous = FleetPlacement.from_json(old_placement)
        except ValueError as exc:
            return None, [unreadable_placement(exc)]
    observed = news.get("observed") or None
    if observed is not None:
        observed = {c: {p: int(n) for p, n in pools.items()} for c, pools in observed.items()}
    # `{}` (an autoscaled fleet with no stack config block) still runs the loop: the test is None.
    if news.get(AUTOSCALE_KEY) is not None and fleet.autoscalers:
        return autoscaled_outputs(fleet, olds or {}, news[AUTOSCALE_KEY], news.get(OBSERVE_KEY) or None, accounting,
                                  observed, time.time() if now is None else now)
    if news.get(OBSERVE_KEY):
        return observed_outputs(fleet, olds or {}, news[OBSERVE_KEY], accounting, observed,
                                time.time() if now is None else now)
    placement = place_fleet(fleet, previous=previous, accounting=accounting, observed=observed)
    return {"placement": placement.to_json()}, []


def outputs(props: Mapping[str, Any]) -> dict[str, Any]:
    """The checked inputs as outputs, the fleet replaced by its digest."""
    out = {k: v for k, v in props.items() if k != "fleet"}
    out[FLEET_DIGEST] = digest(props.get("fleet") or [])
    return out


class PlacementProvider(ResourceProvider):
    def check(self, olds: dict[str, Any], news: dict[str, Any]) -> CheckResult:
        olds, news = normalize_numbers(olds or {}), normalize_numbers(news)
        inputs = dict(news)
        if any(contains_unknown(news.get(k)) for k in DRIVING_KEYS):
            inputs["placement"] = Unknown()  # type: ignore[no-untyped-call]  # the SDK's sentinel class is untyped
            return CheckResult(inputs, [])
        outputs, failures = compute_placement(olds or {}, news)
        if failures:
            return CheckResult(inputs, failures)
        inputs.update(outputs or {})
        return CheckResult(inputs, [])

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        olds, news = normalize_numbers(olds), normalize_numbers(news)
        new_placement = news.get("placement")
        if contains_unknown(new_placement):
            return DiffResult(changes=True, replaces=[], delete_before_replace=False)
        moves = replica_changes(olds.get("placement"), new_placement)
        changed = bool(moves["added"] or moves["removed"])
        changed = changed or olds.get("placement") != new_placement
        changed = changed or olds.get(FLEET_DIGEST) != digest(news.get("fleet") or [])
        changed = changed or any(olds.get(k) != news.get(k) for k in STATE_KEYS)
        changed = changed or any(olds.get(k) != news.get(k) for k in DRIVING_KEYS if k != "fleet")
        # Never a replace: the placement is data; moving a replica is the Kubernetes
        # objects' delete + create, not this resource's.
        return DiffResult(changes=changed, replaces=[], delete_before_replace=False)

    def create(self, props: dict[str, Any]) -> CreateResult:
        return CreateResult("fleet-placement", outs=outputs(props))

    def update(self, _id: str, _olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        # Every output: a partial dict would drop the placement from state.
        return UpdateResult(outs=outputs(news))

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        return ReadResult(id_, props)


@dataclass(kw_only=True)
class FleetPlacementArgs:
    fleet_documents: list[dict[str, Any]]      # `Fleet.to_documents()`
    accounting: str                            # one of the scheduler's ACCOUNTING_MODES
    observed: Mapping[str, Mapping[str, int]] | None = None
    observe: Mapping[str, Any] | None = None   # providers.observe.observe_input(...): read the clusters
    autoscale: Mapping[str, Any] | None = None  # the fleet has ReplicaAutoscalers (providers/autoscale.py)


class FleetPlacementResource(Resource, module="modelplane", name="FleetPlacement"):
    """The placement as a resource. Its type token stays
    `pulumi-python:dynamic/modelplane:FleetPlacement` (the policy pack and existing stacks
    name it); the class is not called FleetPlacement, which is the scheduler's result type."""

    fleet: pulumi.Output[list[dict[str, Any]]]
    accounting: pulumi.Output[str]
    placement: pulumi.Output[dict[str, Any]]
    capacity: pulumi.Output[dict[str, Any]]         # with `observe` (providers/observe.py)
    health: pulumi.Output[dict[str, Any]]
    autoscaling: pulumi.Output[dict[str, Any]]      # with `autoscale` (providers/autoscale.py)

    def __init__(self, name: str, args: FleetPlacementArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        props: dict[str, Any] = {"fleet": args.fleet_documents, "accounting": args.accounting,
                                 "placement": None}
        if args.observed:
            props["observed"] = {c: dict(p) for c, p in args.observed.items()}
        if args.observe:
            props[OBSERVE_KEY] = dict(args.observe)
            props.update({key: None for key in OUTPUT_KEYS})    # outputs check() fills
        if args.autoscale is not None:      # `{}` is a block with every default
            props[AUTOSCALE_KEY] = dict(args.autoscale)
            props[AUTOSCALING_KEY] = None
        super().__init__(PlacementProvider(), name, props, opts)
