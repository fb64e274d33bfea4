"""InferenceClass: the device contract of a node pool (semantics §1.1, §6)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from modelplane.quantity import Quantity
from modelplane.semver import Semver

from .common import ApiModel, KindObject, check_unique


def _parse_quantity(value: str) -> None:
    Quantity.parse(value)


def _parse_semver(value: str) -> None:
    Semver.parse(value)


class AttributeValue(ApiModel):
    """Exactly one typed value, as DRA publishes device attributes."""

    string: Annotated[str, Field(max_length=253)] | None = None
    version: Annotated[str, Field(max_length=32)] | None = None
    bool_: bool | None = Field(default=None, alias="bool")
    int_: int | None = Field(default=None, alias="int")

    @model_validator(mode="after")
    def _exactly_one(self) -> AttributeValue:
        set_fields = [f for f in ("string", "version", "bool_", "int_") if getattr(self, f) is not None]
        if len(set_fields) != 1:
            raise ValueError("an attribute needs exactly one of string, version, bool or int (e.g. {string: Hopper})")
        if self.version is not None:
            try:
                _parse_semver(self.version)
            except ValueError as exc:
                raise ValueError(f"version {self.version!r} is not a semantic version like '9.0.0': {exc}") from None
        if self.int_ is not None and not (-(2**63) <= self.int_ < 2**63):
            raise ValueError("int attribute does not fit in int64")
        return self

    def raw(self) -> dict[str, Any]:
        return self.model_dump(by_alias=True, exclude_none=True)


class CapacityValue(ApiModel):
    value: Annotated[str, Field(min_length=1, max_length=32)]

    @field_validator("value")
    @classmethod
    def _quantity(cls, value: str) -> str:
        try:
            _parse_quantity(value)
        except ValueError as exc:
            raise ValueError(f"{value!r} is not a Kubernetes quantity (e.g. '81559Mi' or '80Gi'): {exc}") from None
        return value

    def raw(self) -> dict[str, Any]:
        return {"value": self.value}


class DeviceKind(ApiModel):
    name: Annotated[str, Field(min_length=1, max_length=63)]
    claim: Literal["DRA", "Synthetic"] = "DRA"
    driver: Annotated[str, Field(min_length=1, max_length=253)]
    device_class_name: Annotated[str, Field(min_length=1, max_length=253)] | None = None
    count: Annotated[int, Field(ge=1, le=64)] = 1
    attributes: dict[str, AttributeValue] = Field(default_factory=dict)
    capacity: dict[str, CapacityValue] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _rules(self) -> DeviceKind:
        if self.claim == "DRA" and not self.device_class_name:
            raise ValueError(
                f"device {self.name!r} has claim DRA but no deviceClassName; name the DRA DeviceClass "
                "its driver installs (e.g. gpu.nvidia.com) or set claim: Synthetic"
            )
        if len(self.attributes) > 32 or len(self.capacity) > 32:
            raise ValueError(f"device {self.name!r} has more than 32 attributes or capacities")
        return self


class Accelerator(ApiModel):
    type: Annotated[str, Field(min_length=1, max_length=63)]
    count: Annotated[int, Field(ge=1, le=16)]


class GkeProvisioning(ApiModel):
    machine_type: Annotated[str, Field(min_length=1)]
    disk_size_gb: Annotated[int, Field(ge=10)] = 100
    accelerator: Accelerator


class EksProvisioning(ApiModel):
    instance_type: Annotated[str, Field(min_length=1)]
    disk_size_gb: Annotated[int, Field(ge=10)] = 100
    accelerator: Accelerator
    ami_type: str | None = None  # ours: override the NVIDIA AMI type (default AL2023_x86_64_NVIDIA)


class AksProvisioning(ApiModel):
    vm_size: Annotated[str, Field(min_length=1)]
    disk_size_gb: Annotated[int, Field(ge=10)] = 100
    accelerator: Accelerator


class NebiusProvisioning(ApiModel):
    platform: Annotated[str, Field(min_length=1, max_length=63)]
    preset: Annotated[str, Field(min_length=1, max_length=63)]
    disk_size_gb: Annotated[int, Field(ge=10)] = 100
    drivers_preset: Annotated[str, Field(min_length=1, max_length=63)] = "cuda13.0"
    accelerator: Accelerator


class VultrProvisioning(ApiModel):
    plan: Annotated[str, Field(min_length=1, max_length=63)]
    accelerator: Accelerator


class VultrBaremetalProvisioning(ApiModel):
    plan: Annotated[str, Field(min_length=1, max_length=63)]
    accelerator: Accelerator


class Provisioning(ApiModel):
    provider: Literal["GKE", "EKS", "AKS", "Nebius", "Vultr", "VultrBaremetal"]
    gke: GkeProvisioning | None = None
    eks: EksProvisioning | None = None
    aks: AksProvisioning | None = None
    nebius: NebiusProvisioning | None = None
    vultr: VultrProvisioning | None = None
    vultr_baremetal: VultrBaremetalProvisioning | None = None

    @model_validator(mode="after")
    def _block(self) -> Provisioning:
        block = "vultr_baremetal" if self.provider == "VultrBaremetal" else self.provider.lower()
        if getattr(self, block) is None:
            alias = "vultrBaremetal" if block == "vultr_baremetal" else block
            raise ValueError(f"provisioning.{alias} is required when provider is {self.provider}")
        return self


class InferenceClassSpec(ApiModel):
    description: str | None = None
    provisioning: Provisioning | None = None
    devices: Annotated[list[DeviceKind], Field(min_length=1, max_length=16)]

    @field_validator("devices")
    @classmethod
    def _unique(cls, devices: list[DeviceKind]) -> list[DeviceKind]:
        return check_unique(devices, "device names")


class InferenceClass(KindObject):
    kind: Literal["InferenceClass"]
    spec: InferenceClassSpec

    def device(self, name: str) -> DeviceKind | None:
        return next((d for d in self.spec.devices if d.name == name), None)
