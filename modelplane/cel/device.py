"""One device kind as a selector sees it (``device.driver``, ``device.attributes``,
``device.capacity``), built from an InferenceClass's typed values."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TypeAlias, TypeVar

import celpy.celtypes as ct

from modelplane.json_types import JsonMapping, JsonValue
from modelplane.quantity import Quantity, QuantityError
from modelplane.semver import Semver, SemverError

from .library import CelQuantity, CelSemver, CelValue

# One device attribute's value once read: DRA's string, bool, int or version.
Attribute: TypeAlias = str | bool | int | Semver
_Converted = TypeVar("_Converted", Attribute, Quantity)


class _Domains(ct.MapType):
    """Unknown domains read as empty maps, as in Kubernetes."""

    def __getitem__(self, key: object) -> CelValue:
        if isinstance(key, str) and not dict.__contains__(self, key):
            return ct.MapType()
        return super().__getitem__(key)


def _attribute_value(key: str, raw: JsonValue) -> Attribute:
    if isinstance(raw, Mapping):
        if len(raw) != 1:
            raise ValueError(f"attribute {key!r}: expected exactly one of string/int/bool/version, got {dict(raw)!r}")
        ((kind, value),) = raw.items()
        if kind == "string" and isinstance(value, str):
            return value
        if kind == "bool" and isinstance(value, bool):
            return value
        if kind == "int" and isinstance(value, int) and not isinstance(value, bool):
            return value
        if kind == "version" and isinstance(value, str):
            try:
                return Semver.parse(value)
            except SemverError as error:
                raise ValueError(f"attribute {key!r}: {error}") from None
        raise ValueError(f"attribute {key!r}: unsupported typed value {dict(raw)!r}")
    if isinstance(raw, (str, bool, int, Semver)):
        return raw
    raise ValueError(f"attribute {key!r}: unsupported value {raw!r}")


def _capacity_value(key: str, raw: JsonValue) -> Quantity:
    value = raw.get("value") if isinstance(raw, Mapping) else raw
    if isinstance(value, Quantity):
        return value
    try:
        text: JsonValue = value   # Quantity.parse refuses a non-string with a QuantityError
        return Quantity.parse(text)
    except QuantityError as error:
        raise ValueError(f"capacity {key!r}: {error}") from None


def _to_cel(value: Attribute | Quantity) -> ct.Value | CelSemver | CelQuantity:
    if isinstance(value, bool):
        return ct.BoolType(value)
    if isinstance(value, int):
        return ct.IntType(value)
    if isinstance(value, str):
        return ct.StringType(value)
    if isinstance(value, Semver):
        return CelSemver(value)
    return CelQuantity(value)


def _by_domain(driver: str, raw: JsonMapping, convert: Callable[[str, JsonValue], _Converted]
               ) -> dict[str, dict[str, _Converted]]:
    domains: dict[str, dict[str, _Converted]] = {}
    for key in sorted(raw):
        domain, _, name = key.partition("/") if "/" in key else (driver, "", key)
        domains.setdefault(domain, {})[name] = convert(key, raw[key])
    return domains


def _cel_domains(domains: Mapping[str, Mapping[str, Attribute | Quantity]]) -> _Domains:
    return _Domains({
        ct.StringType(d): ct.MapType({ct.StringType(n): _to_cel(v) for n, v in names.items()})
        for d, names in domains.items()
    })


@dataclass(frozen=True)
class DeviceView:
    """One device kind as CEL sees it: attributes/capacity grouped by domain, then name."""

    driver: str
    attributes: Mapping[str, Mapping[str, Attribute]]
    capacity: Mapping[str, Mapping[str, Quantity]]
    activation: ct.MapType = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "activation", ct.MapType({
            ct.StringType("driver"): ct.StringType(self.driver),
            ct.StringType("attributes"): _cel_domains(self.attributes),
            ct.StringType("capacity"): _cel_domains(self.capacity),
        }))

    def __hash__(self) -> int:
        # Explicit because the mapping fields are not hashable; lets callers key dicts by view.
        def frozen(domains: Mapping[str, Mapping[str, object]]) -> frozenset[tuple[str, frozenset[tuple[str, object]]]]:
            return frozenset((d, frozenset(names.items())) for d, names in domains.items())
        return hash((self.driver, frozen(self.attributes), frozen(self.capacity)))

    @classmethod
    def from_spec(
        cls, driver: str, attributes_raw: JsonMapping | None, capacity_raw: JsonMapping | None
    ) -> DeviceView:
        """Raises ValueError naming the key when a typed value is malformed."""
        return cls(
            driver,
            _by_domain(driver, attributes_raw or {}, _attribute_value),
            _by_domain(driver, capacity_raw or {}, _capacity_value),
        )
