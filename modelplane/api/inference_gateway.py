"""InferenceGateway: the control-plane gateway (semantics §1.10).

Two generations of the reference are accepted: v0.3.1's singleton `default` with
`backend: Traefik` and its Helm settings, and the newer form that runs on an
InferenceCluster (`clusterName`) with optional TLS and caller API keys.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from .common import GATEWAY_HOSTNAME_PATTERN, ApiModel, KindObject, LabelSelector, NameRef


class Metallb(ApiModel):
    address_pool: Annotated[str, Field(min_length=1)]


class TraefikSettings(ApiModel):
    version: Annotated[str, Field(min_length=1)]
    load_balancer: Literal["MetalLB"] | None = None
    metallb: Metallb | None = None

    @model_validator(mode="after")
    def _metallb(self) -> TraefikSettings:
        if self.load_balancer == "MetalLB" and self.metallb is None:
            raise ValueError("traefik.metallb.addressPool is required when loadBalancer is MetalLB")
        return self


class GatewayTls(ApiModel):
    certificate_refs: Annotated[list[NameRef], Field(min_length=1, max_length=8)]


class ApiKeyAuth(ApiModel):
    secret_selector: LabelSelector


class GatewayAuth(ApiModel):
    method: Literal["APIKey"] = "APIKey"
    api_key: ApiKeyAuth


class InferenceGatewaySpec(ApiModel):
    backend: Literal["Traefik"] | None = None
    traefik: TraefikSettings | None = None
    cluster_name: Annotated[str, Field(min_length=1)] | None = None
    hostname: Annotated[str, Field(max_length=253, pattern=GATEWAY_HOSTNAME_PATTERN)] | None = None
    tls: GatewayTls | None = None
    auth: GatewayAuth | None = None
    service_selector: LabelSelector | None = None

    @model_validator(mode="after")
    def _traefik(self) -> InferenceGatewaySpec:
        if self.backend == "Traefik" and self.traefik is None:
            raise ValueError("traefik (with version, the Traefik Helm chart version) is required when "
                             "backend is Traefik")
        return self


class InferenceGateway(KindObject):
    kind: Literal["InferenceGateway"]
    spec: InferenceGatewaySpec
