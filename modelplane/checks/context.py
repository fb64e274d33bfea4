"""What a check reads: the fleet, its placement, observed pool sizes and, in the policy
pack, the program's other resources."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from modelplane.api import Fleet
from modelplane.api.common import KindObject
from modelplane.json_types import JsonMapping, JsonValue
from modelplane.scheduler import FleetPlacement


@dataclass(frozen=True)
class ProgramResource:
    """One resource the Pulumi program registers, as the analyzer hands it over.

    `props` are camelCase inputs; string values that were Pulumi secrets arrive as
    `SecretString` (see modelplane.checks.secrets)."""

    type: str
    name: str
    props: JsonMapping
    # False when the analyzer could not tell secrets from plain values; the checks then skip
    # the "must be a secret" rule instead of flagging every value.
    secrets_marked: bool = True


@dataclass
class CheckContext:
    fleet: Fleet
    placement: FleetPlacement | None = None    # None when nothing could be placed
    observed: Mapping[str, Mapping[str, int]] | None = None
    program: list[ProgramResource] = field(default_factory=list)
    options: Mapping[str, JsonMapping] = field(default_factory=dict)

    def ref(self, obj: KindObject) -> str:
        """`Kind/namespace/name (source)`, the resource half of every message."""
        meta = obj.metadata
        name = f"{meta.namespace}/{meta.name}" if getattr(obj, "NAMESPACED", False) else meta.name
        text = f"{obj.kind}/{name}"
        source = self.fleet.source_of(obj)
        return f"{text} ({source})" if source != "<unknown>" else text

    def option(self, policy: str, key: str, default: JsonValue = None) -> JsonValue:
        return (self.options.get(policy) or {}).get(key, default)


def split_ref(resource: str) -> tuple[str, str, str]:
    """(object, file, document) of a finding's resource as `CheckContext.ref` wrote it:
    `("ModelService/ml-team/chat", "examples/kind/models.yaml", "2")`; file and document are ''
    where the resource names no manifest."""
    text, sep, rest = resource.partition(" (")
    if not sep or not rest.endswith(")"):
        return resource, "", ""
    file, _, index = rest[:-1].rpartition("#")
    return (text, file, index) if file and index.isdigit() else (resource, "", "")
