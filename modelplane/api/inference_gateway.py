"""InferenceGateway: the control-plane gateway (semantics §1.10)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from .common import ApiModel, KindObject, LabelSelector


class Metallb(ApiModel):
    address_pool: Annotated[str, Field(min_length=1)]


class TraefikSettings(ApiModel):
    version: Annotated[str, Field(min_length=1)]
    load_balancer: Literal["MetalLB"] | None = None
    metallb: Metallb | None = None

    @model_validator(mode="after")
    def _metallb(self) -> "TraefikSettings":
        if self.load_balancer == "MetalLB" and self.metallb is None:
            raise ValueError("traefik.metallb.addressPool is required when loadBalancer is MetalLB")
        return self


class InferenceGatewaySpec(ApiModel):
    backend: Literal["Traefik"] = "Traefik"
    traefik: TraefikSettings | None = None
    cluster_name: str | None = None
    service_selector: LabelSelector | None = None

    @model_validator(mode="after")
    def _traefik(self) -> "InferenceGatewaySpec":
        if self.backend == "Traefik" and self.traefik is None:
            raise ValueError("traefik (with version, the Traefik Helm chart version) is required when backend is Traefik")
        return self


class InferenceGateway(KindObject):
    kind: Literal["InferenceGateway"]
    spec: InferenceGatewaySpec
