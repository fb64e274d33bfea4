"""ModelService: a routing policy over endpoints, one stable URL (semantics §1.9, §4.3)."""

from __future__ import annotations

import re
from typing import Annotated, ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from .common import ApiModel, KindObject, RequiredLabelSelector, check_dns_label, check_unique
from .inference_gateway import CALLER_PATTERN
from .placement_policy import RoutingPolicy

_DURATION = r"^([0-9]+(h|m|s|ms)){1,4}$"


class ServiceEntry(ApiModel):
    name: str | None = None
    priority: Annotated[int, Field(ge=0, le=63)] = 0
    weight: Annotated[int, Field(ge=1, le=1_000_000)] = 1
    selector: RequiredLabelSelector
    routing_policy: RoutingPolicy | None = None  # ours: modelplane/api/placement_policy.py

    @property
    def balancing(self) -> str:
        return self.routing_policy.balancing if self.routing_policy is not None else "RoundRobin"

    @field_validator("name")
    @classmethod
    def _name(cls, value: str | None) -> str | None:
        return None if value is None else check_dns_label(value, "endpoint entry name")


_DURATION_PART = re.compile(r"([0-9]+)(ms|h|m|s)")
_UNIT_SECONDS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}


class Timeouts(ApiModel):
    request: Annotated[str, Field(pattern=_DURATION)] = "300s"
    idle: Annotated[str, Field(pattern=_DURATION)] = "60s"

    @property
    def request_seconds(self) -> float:
        """`request` in seconds (`1h30m` is 5400)."""
        return sum(int(n) * _UNIT_SECONDS[unit] for n, unit in _DURATION_PART.findall(self.request))


Caller = Annotated[str, Field(pattern=CALLER_PATTERN)]


class ModelServiceSpec(ApiModel):
    endpoints: Annotated[list[ServiceEntry], Field(min_length=1, max_length=32)]
    timeouts: Timeouts | None = None
    # Ours: the caller identities (the gateway's API keys) that may use this service; absent,
    # every authenticated caller. Needs an InferenceGateway with auth.
    allowed_callers: Annotated[list[Caller], Field(min_length=1, max_length=256)] | None = None

    @field_validator("allowed_callers")
    @classmethod
    def _unique_callers(cls, callers: list[str] | None) -> list[str] | None:
        if callers is not None and len(set(callers)) != len(callers):
            raise ValueError("allowedCallers names a caller more than once")
        return callers

    @field_validator("endpoints")
    @classmethod
    def _unique_names(cls, entries: list[ServiceEntry]) -> list[ServiceEntry]:
        return check_unique(entries, "endpoint entry names")

    @property
    def cache_aware(self) -> bool:
        """Every entry asks `routingPolicy.balancing: CacheAware` (the validator below refuses a mix)."""
        return all(e.balancing == "CacheAware" for e in self.endpoints)

    @model_validator(mode="after")
    def _one_balancing(self) -> ModelServiceSpec:
        """The kvroute plugin balances a whole service (its router) and forwards the request itself,
        so a service is CacheAware on every entry or on none, and in one priority tier only: kvroute
        has no failover to a backup tier."""
        asked = [i for i, e in enumerate(self.endpoints) if e.balancing == "CacheAware"]
        if not asked:
            return self
        if len(asked) != len(self.endpoints):
            other = next(i for i, e in enumerate(self.endpoints) if e.balancing != "CacheAware")
            raise ValueError(
                f"endpoints[{other}].routingPolicy.balancing is RoundRobin but endpoints[{asked[0]}]"
                ".routingPolicy.balancing is CacheAware; the gateway balances a whole service one way: "
                "set balancing: CacheAware on every entry, or on none")
        capacity = [i for i, e in enumerate(self.endpoints)
                    if e.routing_policy is not None and e.routing_policy.weighting == "Capacity"]
        if capacity:
            raise ValueError(
                f"endpoints[{capacity[0]}].routingPolicy.weighting is Capacity, which balancing CacheAware cannot "
                "honour (the kvroute plugin picks a replica by cache and load, one engine a replica); use "
                "weighting: Even, or balancing: RoundRobin")
        tiers = sorted({e.priority for e in self.endpoints})
        if len(tiers) > 1:
            other = next(i for i, e in enumerate(self.endpoints) if e.priority != tiers[0])
            raise ValueError(
                f"endpoints[{other}].priority is {self.endpoints[other].priority}, another tier than "
                f"endpoints[0]'s {self.endpoints[0].priority}: balancing CacheAware routes one priority tier "
                "(the kvroute plugin has no failover to a backup tier); give every entry one priority, "
                "or use balancing: RoundRobin")
        return self


class ModelService(KindObject):
    kind: Literal["ModelService"]
    spec: ModelServiceSpec

    @property
    def request_timeout_seconds(self) -> float:
        """How long one request may take (spec.timeouts.request, default 300s)."""
        return (self.spec.timeouts or Timeouts()).request_seconds

    NAMESPACED: ClassVar[bool] = True
