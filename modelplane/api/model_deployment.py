"""ModelDeployment: what ML teams run, N times, anywhere it fits (semantics §1.6)."""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from .common import (
    ApiModel,
    KindObject,
    LabelledObjectMeta,
    LabelSelector,
    NameRef,
    check_dns1035_label,
    check_dns_label,
    check_unique,
    check_user_labels,
)
from .placement_policy import PlacementPolicy

MAX_REPLICAS = 1000  # the reference caps at 10 (issue #438); a fleet needs more


class Selector(ApiModel):
    cel: Annotated[str, Field(min_length=1, max_length=10240)]


class DeviceRequest(ApiModel):
    name: Annotated[str, Field(min_length=1, max_length=63)]
    count: Annotated[int, Field(ge=1, le=64)] = 1
    selectors: Annotated[list[Selector], Field(min_length=1, max_length=8)]

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        # It names the request in the ResourceClaimTemplate, where DRA requires a DNS label.
        return check_dns_label(value, "device request name")


class NodeSelector(ApiModel):
    devices: Annotated[list[DeviceRequest], Field(min_length=1, max_length=16)]

    @field_validator("devices")
    @classmethod
    def _unique(cls, devices: list[DeviceRequest]) -> list[DeviceRequest]:
        return check_unique(devices, "device request names")


class Worker(ApiModel):
    nodes: Annotated[int, Field(ge=1, le=63)]


class KeyRef(ApiModel):
    name: Annotated[str, Field(min_length=1)]
    key: Annotated[str, Field(min_length=1)]
    optional: bool | None = None


class FieldRef(ApiModel):
    field_path: Annotated[str, Field(min_length=1)]
    api_version: str | None = None


class EnvSource(ApiModel):
    secret_key_ref: KeyRef | None = None
    config_map_key_ref: KeyRef | None = None
    field_ref: FieldRef | None = None


class EnvVar(ApiModel):
    name: Annotated[str, Field(min_length=1)]
    value: str | None = None
    value_from: EnvSource | None = None


class Container(ApiModel):
    name: Annotated[str, Field(min_length=1)]
    image: Annotated[str, Field(min_length=1)]
    command: list[str] | None = None
    args: list[str] | None = None
    env: list[EnvVar] = Field(default_factory=list)


class PodSpec(ApiModel):
    containers: list[Container]
    image_pull_secrets: list[NameRef] = Field(default_factory=list)

    @field_validator("containers")
    @classmethod
    def _one_engine(cls, containers: list[Container]) -> list[Container]:
        if len(containers) != 1 or containers[0].name != "engine":
            names = ", ".join(c.name for c in containers) or "none"
            raise ValueError(f"exactly one container named 'engine' is required (found: {names})")
        return containers

    @property
    def engine(self) -> Container:
        return self.containers[0]


class PodMetadata(ApiModel):
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)

    @field_validator("labels")
    @classmethod
    def _labels(cls, labels: dict[str, str]) -> dict[str, str]:
        return check_user_labels(labels, "labels")

    @field_validator("annotations")
    @classmethod
    def _annotations(cls, annotations: dict[str, str]) -> dict[str, str]:
        return check_user_labels(annotations, "annotations", values_are_labels=False)


class PodTemplate(ApiModel):
    metadata: PodMetadata = Field(default_factory=PodMetadata)
    spec: PodSpec


class Member(ApiModel):
    role: Literal["Standalone", "Leader", "Worker"] = "Standalone"
    node_selector: NodeSelector | None = None
    worker: Worker | None = None
    template: PodTemplate

    @model_validator(mode="after")
    def _worker_block(self) -> Member:
        if self.worker is not None and self.role != "Worker":
            raise ValueError(f"worker is only allowed on role Worker (this member is {self.role})")
        return self

    @property
    def pods(self) -> int:
        """Pods (and so nodes) one copy of this member spans."""
        return self.worker.nodes if self.role == "Worker" and self.worker else 1

    @property
    def requests(self) -> list[DeviceRequest]:
        return self.node_selector.devices if self.node_selector else []


class Engine(ApiModel):
    name: str
    copies: Annotated[int, Field(ge=1, le=64)] = 1
    phase: Literal["Prefill", "Decode"] | None = None
    members: Annotated[list[Member], Field(min_length=1, max_length=2)]

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        return check_dns_label(value, "engine name")

    @model_validator(mode="after")
    def _members(self) -> Engine:
        roles = [m.role for m in self.members]
        if roles not in (["Standalone"], ["Leader", "Worker"], ["Worker", "Leader"]):
            raise ValueError(
                f"engine {self.name!r} has members {roles}; use exactly one Standalone member, "
                "or one Leader and one Worker"
            )
        if not any(m.node_selector for m in self.members):
            raise ValueError(
                f"engine {self.name!r}: at least one member needs a nodeSelector with device requests, "
                "otherwise it can never claim a GPU"
            )
        return self

    def member_index(self, role: str) -> int | None:
        return next((i for i, m in enumerate(self.members) if m.role == role), None)


class Toleration(ApiModel):
    key: str | None = None
    operator: Literal["Exists", "Equal"] = "Equal"
    value: str | None = None
    effect: Literal["NoSchedule", "NoExecute"] | None = None

    @model_validator(mode="after")
    def _rules(self) -> Toleration:
        if self.operator == "Equal" and not self.key:
            raise ValueError("a toleration with operator Equal needs a key; use operator Exists to match any key")
        if self.operator == "Exists" and self.value:
            raise ValueError("a toleration with operator Exists must not set value; remove value or use Equal")
        return self


class Serving(ApiModel):
    mode: Literal["Unified", "PrefillDecode"] = "Unified"
    # PrefillDecode: the image of the P/D router put in front of the phases (a mirror, say, in a
    # VPC without egress); default per engine family (modelplane.render.pd_router.ROUTERS).
    router_image: Annotated[str, Field(min_length=1, max_length=512)] | None = None


class DeploymentSpecInner(ApiModel):
    engines: Annotated[list[Engine], Field(min_length=1, max_length=8)]
    cluster_selector: LabelSelector | None = None
    model_cache_ref: NameRef | None = None
    serving: Serving | None = None
    tolerations: list[Toleration] = Field(default_factory=list)

    @model_validator(mode="after")
    def _engines(self) -> DeploymentSpecInner:
        check_unique(self.engines, "engine names")
        phases = sorted(e.phase for e in self.engines if e.phase)
        if self.mode == "PrefillDecode":
            if len(self.engines) != 2 or phases != ["Decode", "Prefill"]:
                raise ValueError(
                    "serving.mode PrefillDecode needs exactly two engines, one with phase Prefill "
                    "and one with phase Decode"
                )
        elif phases:
            raise ValueError("engines[].phase is only allowed with serving.mode PrefillDecode; remove phase")
        return self

    @property
    def mode(self) -> str:
        return self.serving.mode if self.serving else "Unified"

    def engine(self, name: str) -> Engine | None:
        return next((e for e in self.engines if e.name == name), None)


class TemplateMetadata(ApiModel):
    labels: dict[str, str] = Field(default_factory=dict)

    @field_validator("labels")
    @classmethod
    def _labels(cls, labels: dict[str, str]) -> dict[str, str]:
        return check_user_labels(labels, "template.metadata.labels")


class DeploymentTemplate(ApiModel):
    metadata: TemplateMetadata = Field(default_factory=TemplateMetadata)
    spec: DeploymentSpecInner


class ModelDeploymentSpec(ApiModel):
    replicas: Annotated[int, Field(ge=0, le=MAX_REPLICAS)]
    template: DeploymentTemplate
    placement_policy: PlacementPolicy | None = None  # ours: modelplane/api/placement_policy.py


class DeploymentMeta(LabelledObjectMeta):
    """A deployment's name starts every replica's name, which names the replica's Service and
    LeaderWorkerSet: both must be DNS-1035 labels (the LWS webhook validates its name with
    NameIsDNS1035Label because it names the group's headless Service, kubernetes-sigs/lws
    pkg/webhooks/leaderworkerset_webhook.go; kubernetes/kubernetes pkg/apis/core/validation
    ValidateServiceName does too unless RelaxedServiceNameValidation, alpha in 1.34, is on)."""

    @field_validator("name")
    @classmethod
    def _service_name(cls, value: str) -> str:
        return check_dns1035_label(value, "metadata.name", "each replica's Service and LeaderWorkerSet")


class ModelDeployment(KindObject):
    kind: Literal["ModelDeployment"]
    metadata: DeploymentMeta
    spec: ModelDeploymentSpec

    NAMESPACED: ClassVar[bool] = True

    @property
    def engines(self) -> list[Engine]:
        return self.spec.template.spec.engines
