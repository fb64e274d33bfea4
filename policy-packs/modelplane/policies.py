"""CrossGuard wrappers around modelplane.checks.

Every fleet check becomes a ResourceValidationPolicy on the placement resource
(`pulumi-python:dynamic/modelplane:FleetPlacement`): its checked inputs carry the fleet
manifests, the placement computed by the provider's check() and the observed pool sizes,
all known at preview. The secrets policy also reads every other resource the program
registers (component inputs, rendered Kubernetes objects). A stack policy reports a stack
with no placement resource, where every fleet policy would otherwise pass by seeing nothing.
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pulumi_policy import (
    EnforcementLevel,
    PolicyConfigSchema,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)
from pulumi_policy.proxy import UnknownValueError

try:
    import modelplane  # noqa: F401
except ImportError:  # run from a checkout without `pip install -e .`
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from modelplane.api import load_documents
from modelplane.checks import (
    ADVISORY,
    CHECKS,
    MANDATORY,
    PACK_ONLY_POLICIES,
    CheckContext,
    Finding,
    ProgramResource,
    place,
)
from modelplane.checks.secrets import PLACEMENT_TYPE, SecretString, resource_findings
from modelplane.observe import CAPACITY_KEY
from modelplane.observe.capacity import FleetCapacity
from modelplane.scheduler import FleetPlacement

PACK_NAME = "modelplane"
FLEET_PRESENT = PACK_ONLY_POLICIES[0]
_LEVELS = {MANDATORY: EnforcementLevel.MANDATORY, ADVISORY: EnforcementLevel.ADVISORY}
_CONFIG = {
    "prefill-decode-needs-nixl": PolicyConfigSchema(properties={
        "images": {
            "type": "object",
            "description": "extra engine image repositories known to ship NIXL, repository -> "
                           "first tag that does (e.g. {\"myorg/vllm\": \"1.4.0\"})",
            "additionalProperties": {"type": "string"},
        },
    }),
}


# --- secrets: make Pulumi secrets visible to validators ---------------------------------------
# pulumi-policy 1.21.0 unwraps secret values before Analyze/AnalyzeStack validators see them
# (deserialize_properties without proxy_secrets), although the engine sends them marked. We
# wrap that one module-level function so string values inside a secret arrive as SecretString,
# a str subclass every other policy treats as a plain string. Without the hook the secrets
# policy still checks literals, but skips "must be a secret".

def _mark_secrets(value: Any, *, inside: bool = False) -> Any:
    from pulumi_policy.deserialize import SPECIAL_SECRET_SIG, SPECIAL_SIG_KEY

    if isinstance(value, dict):
        if value.get(SPECIAL_SIG_KEY) == SPECIAL_SECRET_SIG and "value" in value:
            return _mark_secrets(value["value"], inside=True)
        return {k: _mark_secrets(v, inside=inside) for k, v in value.items()}
    if isinstance(value, list):
        return [_mark_secrets(v, inside=inside) for v in value]
    if inside and isinstance(value, str):
        return SecretString(value)
    return value


def install_secret_marking() -> bool:
    try:
        import pulumi_policy.policy as sdk
        from pulumi_policy.deserialize import SPECIAL_SECRET_SIG  # noqa: F401
    except ImportError:
        return False
    original = getattr(sdk, "deserialize_properties", None)
    if original is None:
        return False
    if getattr(original, "marks_secrets", False):
        return True

    # The signature mirrors the SDK function it replaces, which the SDK calls positionally.
    def deserialize_marking_secrets(
        props: dict[str, Any], proxy_secrets: bool = False,  # noqa: FBT001, FBT002
    ) -> dict[str, Any]:
        # Remediate passes proxy_secrets=True and needs the SDK's own Secret wrappers.
        return original(props if proxy_secrets else _mark_secrets(props), proxy_secrets)

    deserialize_marking_secrets.marks_secrets = True
    sdk.deserialize_properties = deserialize_marking_secrets
    return True


SECRETS_MARKED = install_secret_marking()


# --- reading the placement resource -------------------------------------------------------------

_RAISE = object()


def plain(value: Any, unknown: Any = _RAISE) -> Any:
    """The analyzer's proxies as dicts and lists. By default reading an unknown value raises
    the SDK's UnknownValueError, which it reports as "can't run policy during preview";
    with `unknown` given, unknown values become that instead.

    Numbers cross the analyzer as protobuf doubles, so whole numbers come back as ints
    (the placement JSON's indexes and counts must be ints)."""
    if isinstance(value, str):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, Mapping):
        return {k: _item(value, k, unknown) for k in value}
    if isinstance(value, Sequence):
        return [_item(value, i, unknown) for i in range(len(value))]
    return value


def _item(container: Any, key: Any, unknown: Any) -> Any:
    try:
        return plain(container[key], unknown)
    except UnknownValueError:
        if unknown is _RAISE:
            raise
        return unknown


def placement_props(args: ResourceValidationArgs) -> dict:
    """The placement resource's inputs. An unknown `placement` (the provider's check() could
    not compute it yet) is dropped and the pack places the fleet itself, so the fleet
    policies still run; an unknown fleet still makes them report "can't run"."""
    props = {}
    for key in args.props:
        try:
            props[key] = plain(args.props[key])
        except UnknownValueError:
            if key != "placement":
                raise
    return props


@functools.lru_cache(maxsize=8)
def _fleet_inputs(name: str, encoded: str) -> tuple[Any, Any, Any]:
    props = json.loads(encoded)
    fleet = load_documents(props.get("fleet") or [], source=f"{name}.fleet")
    observed = props.get("observed") or None
    if props.get(CAPACITY_KEY):         # read from the clusters at preview (docs/observe.md)
        observed = {**(observed or {}), **FleetCapacity.from_json(props[CAPACITY_KEY]).node_counts()} or None
    placement = props.get("placement")
    placement = FleetPlacement.from_json(placement) if placement else place(
        fleet, observed, props.get("accounting") or "Device")
    return fleet, placement, observed


def context(args: ResourceValidationArgs, policy: str) -> CheckContext:
    props = placement_props(args)
    try:
        fleet, placement, observed = _fleet_inputs(args.name, json.dumps(props, sort_keys=True))
    except ValueError as exc:  # ManifestError, PlacementFormatError
        # The provider's check() rejects such inputs and fails the preview itself; saying
        # why here beats crashing the analyzer.
        args.not_applicable(f"the placement inputs do not load: {exc}")
        raise AssertionError("not_applicable returned") from exc
    program = [ProgramResource(args.resource_type, args.name, props, SECRETS_MARKED)]
    return CheckContext(fleet, placement, observed, program, {policy: dict(args.get_config() or {})})


def message(finding: Finding) -> str:
    return f"{finding.location}: {finding.message}"


def _fleet_policy(name: str) -> ResourceValidationPolicy:
    check = CHECKS[name]

    def validate(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
        if args.resource_type != PLACEMENT_TYPE:
            return
        for finding in check.run(context(args, name)):
            report_violation(message(finding), None)

    return ResourceValidationPolicy(
        name=name, description=check.description, validate=validate,
        enforcement_level=_LEVELS[check.level], config_schema=_CONFIG.get(name))


def _secrets_policy() -> ResourceValidationPolicy:
    check = CHECKS["secrets"]

    def validate(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
        if args.resource_type == PLACEMENT_TYPE:
            findings = check.run(context(args, "secrets"))
        else:
            findings = resource_findings(
                # An unknown value can't be judged at preview; the rest of the resource can.
                ProgramResource(args.resource_type, args.name, plain(args.props, None), SECRETS_MARKED))
        for finding in findings:
            report_violation(message(finding), None)

    return ResourceValidationPolicy(
        name="secrets", description=check.description, validate=validate,
        enforcement_level=_LEVELS[check.level])


def _fleet_present() -> StackValidationPolicy:
    def validate(args: StackValidationArgs, report_violation: ReportViolation) -> None:
        if not any(r.resource_type == PLACEMENT_TYPE for r in args.resources):
            report_violation(
                f"no {PLACEMENT_TYPE} resource in this stack: the fleet policies of this pack "
                "checked nothing. Fix: run the pack against the Modelplane program (its "
                "placement resource carries the fleet), or disable the pack for this stack.", None)

    return StackValidationPolicy(
        name=FLEET_PRESENT, validate=validate, enforcement_level=EnforcementLevel.ADVISORY,
        description="The stack has a Modelplane placement resource for the fleet policies to read")


def build_policies() -> list:
    policies: list = [_fleet_policy(name) for name in CHECKS if name != "secrets"]
    policies.append(_secrets_policy())
    policies.append(_fleet_present())
    return policies
