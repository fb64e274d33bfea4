"""The one home of the types of arbitrary JSON: values read from a manifest, a stack's config, an
API server's answer or the Pulumi engine (dynamic provider props, stack outputs), or written to
them. Everything else gets a concrete type (a model, a dataclass, a TypedDict).

`JsonValue` is `Any`, not a recursive union: these values are read with checks at the boundary
(`modelplane.api`, `modelplane.kube`, `*.from_json`), and a union would force a cast at every
`obj["metadata"]["name"]` of code that already checked the shape. The alias says which `Any`s are
JSON, so `grep -w Any` finds only the ones that are not."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeAlias

JsonValue: TypeAlias = Any
JsonObject: TypeAlias = dict[str, JsonValue]
JsonMapping: TypeAlias = Mapping[str, JsonValue]
