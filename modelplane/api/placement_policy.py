"""Our placement extensions: fields the reference does not have.

* `ModelDeployment.spec.placementPolicy` — `spreadConstraints` and `clusterPreferences`;
* `ModelService.spec.endpoints[].routingPolicy` — `weighting: Even | Capacity` and
  `balancing: RoundRobin | CacheAware`;
* `FleetBudget` — a cluster-scoped kind of its own API group, `FLEET_BUDGET_API_VERSION`.

Every field is optional, so the reference's manifests load unchanged. The two blocks
carry names the reference's schemas do not know: its API server refuses them under
kubectl's default strict field validation ("unknown field spec.placementPolicy"), which
is how a manifest using them says so to a reference-only reader (docs/scheduler.md).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Annotated, ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from modelplane.suggest import did_you_mean

from .common import (
    ApiModel,
    KindObject,
    LabelSelector,
    check_dns_label,
    check_dns_subdomain,
    check_qualified_name,
    check_unique,
)
from .inference_class import InferenceClass

# Not under modelplane.ai: that domain is the reference's, which may one day define a
# kind of the same name. A group of our own makes the reference's API server answer
# "no matches for kind FleetBudget in version placement.modelplane-pulumi.dev/v1alpha1".
FLEET_BUDGET_API_VERSION = "placement.modelplane-pulumi.dev/v1alpha1"

MAX_SPREAD_CONSTRAINTS = 8
MAX_TIERS = 8
MAX_GROUPS = 1000
MAX_RETURN_AFTER_PLANS = 100
MAX_MOVES_PER_PLAN = 64
MAX_BUDGET_DEVICES = 1_000_000

class SpreadConstraint(ApiModel):
    """Replicas spread over the groups of clusters sharing one value of a label."""

    topology_key: Annotated[str, Field(min_length=1, max_length=317)]
    min_groups: Annotated[int, Field(strict=True, ge=1, le=MAX_GROUPS)] = 1
    max_groups: Annotated[int, Field(strict=True, ge=1, le=MAX_GROUPS)] | None = None
    max_replicas_per_group: Annotated[int, Field(strict=True, ge=1, le=MAX_GROUPS)] | None = None

    @field_validator("topology_key")
    @classmethod
    def _key(cls, value: str) -> str:
        check_qualified_name(value)
        return value

    @model_validator(mode="after")
    def _bounds(self) -> SpreadConstraint:
        if self.max_groups is not None and self.max_groups < self.min_groups:
            raise ValueError(
                f"maxGroups {self.max_groups} is below minGroups {self.min_groups}; "
                "raise maxGroups or lower minGroups"
            )
        return self


class PreferenceTier(ApiModel):
    """One tier of clusters; a cluster belongs to the first tier whose selector matches."""

    name: str
    cluster_selector: LabelSelector = Field(default_factory=LabelSelector)

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        return check_dns_label(value, "tier name")


class ClusterPreferences(ApiModel):
    tiers: Annotated[list[PreferenceTier], Field(min_length=1, max_length=MAX_TIERS)]
    # Consecutive plans a more preferred tier must have had room before a replica moves back.
    return_after_plans: Annotated[int, Field(strict=True, ge=1, le=MAX_RETURN_AFTER_PLANS)] = 3
    # Moves in flight at a time (0: never move back).
    max_moves_per_plan: Annotated[int, Field(strict=True, ge=0, le=MAX_MOVES_PER_PLAN)] = 1

    @field_validator("tiers")
    @classmethod
    def _unique(cls, tiers: list[PreferenceTier]) -> list[PreferenceTier]:
        return check_unique(tiers, "tier names")


class PlacementPolicy(ApiModel):
    """`ModelDeployment.spec.placementPolicy`."""

    spread_constraints: Annotated[list[SpreadConstraint], Field(max_length=MAX_SPREAD_CONSTRAINTS)] = Field(
        default_factory=list)
    cluster_preferences: ClusterPreferences | None = None

    @field_validator("spread_constraints")
    @classmethod
    def _unique_keys(cls, rules: list[SpreadConstraint]) -> list[SpreadConstraint]:
        return check_unique(rules, "spreadConstraints topologyKey", key=lambda r: r.topology_key)


class RoutingPolicy(ApiModel):
    """`ModelService.spec.endpoints[].routingPolicy`: how an entry splits its share."""

    weighting: Literal["Even", "Capacity"] = "Even"
    # How the gateways pick among the service's backends within those weights: RoundRobin (the
    # weighted round robin, exact splits) or CacheAware (the kvroute plugin: by prefix-cache overlap
    # and load, within the clusters' weights; docs/kv-routing.md). The gateway balances a whole
    # service one way, so every entry of a CacheAware service says so (ModelServiceSpec checks it).
    balancing: Literal["RoundRobin", "CacheAware"] = "RoundRobin"


class FleetBudgetSpec(ApiModel):
    max_devices: Annotated[int, Field(strict=True, ge=0, le=MAX_BUDGET_DEVICES)]
    # Scope: deployments in these namespaces (none listed: every namespace) whose
    # metadata.labels match the selector (none: every deployment).
    namespaces: Annotated[list[str], Field(max_length=64)] = Field(default_factory=list)
    deployment_selector: LabelSelector | None = None
    # Count only DRA devices of these classes (none listed: every DRA device).
    device_class_names: Annotated[list[str], Field(max_length=16)] = Field(default_factory=list)

    @field_validator("namespaces")
    @classmethod
    def _namespaces(cls, values: list[str]) -> list[str]:
        return check_unique([check_dns_label(v, "namespace") for v in values], "namespaces", key=str)

    @field_validator("device_class_names")
    @classmethod
    def _classes(cls, values: list[str]) -> list[str]:
        return check_unique([check_dns_subdomain(v, "deviceClassName") for v in values], "deviceClassNames",
                            key=str)


class FleetBudget(KindObject):
    """The most DRA devices the deployments in its scope may claim, fleet-wide."""

    api_version: Literal["placement.modelplane-pulumi.dev/v1alpha1"]
    kind: Literal["FleetBudget"]
    spec: FleetBudgetSpec

    SERVED_API_VERSION: ClassVar[str] = FLEET_BUDGET_API_VERSION

    @field_validator("api_version")
    @classmethod
    def _api_version(cls, value: str) -> str:
        # Overrides KindObject's check: this kind is served by our own group.
        return value

    def selects(self, namespace: str, labels: dict[str, str]) -> bool:
        spec = self.spec
        if spec.namespaces and namespace not in spec.namespaces:
            return False
        return spec.deployment_selector is None or spec.deployment_selector.matches(labels)

    def unknown_device_classes(self, classes: Iterable[InferenceClass]) -> list[tuple[str, str]]:
        """(field path, message) for every `deviceClassNames` entry that no DRA device of the
        fleet's InferenceClasses declares. Such a budget counts nothing: `maxDevices: 0`
        with a typo in the class reported "0 of 0 devices used" and let everything place.
        A budget fails closed, so the loader refuses it (docs/scheduler.md, FleetBudget)."""
        in_use = sorted({d.device_class_name for c in classes for d in c.spec.devices
                         if d.claim == "DRA" and d.device_class_name})
        known = ", ".join(in_use) or "none: the fleet declares no DRA device"
        return [(f"spec.deviceClassNames[{i}]",
                 f"no InferenceClass of the fleet has a DRA device of DeviceClass {name!r} (in use: {known})"
                 f"{did_you_mean(name, in_use)}, so this budget would count no device and limit nothing; fix the "
                 "name, or remove it to count every DRA device")
                for i, name in enumerate(self.spec.device_class_names) if name not in in_use]


__all__ = [
    "FLEET_BUDGET_API_VERSION", "ClusterPreferences", "FleetBudget", "FleetBudgetSpec",
    "PlacementPolicy", "PreferenceTier", "RoutingPolicy", "SpreadConstraint",
]
