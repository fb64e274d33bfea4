"""InferenceGateway: the control-plane gateway (semantics §1.10).

Two generations of the reference are accepted: v0.3.1's singleton `default` with
`backend: Traefik` and its Helm settings, and the newer form that runs on an
InferenceCluster (`clusterName`) with optional TLS and caller API keys.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from .common import GATEWAY_HOSTNAME_PATTERN, ApiModel, KindObject, LabelSelector, NameRef, check_dns_subdomain


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


# A caller identity is a key of a Kubernetes Secret's data (what the reference takes it from).
CALLER_PATTERN = r"^[-._a-zA-Z0-9]{1,253}$"


class GatewayTls(ApiModel):
    """HTTPS at the edge: kubernetes.io/tls Secrets in modelplane-system (the reference's
    field and limits), or ours: `selfSigned` (kind, sim, render and demo only; said so)."""

    certificate_refs: Annotated[list[NameRef], Field(max_length=8)] = Field(default_factory=list)
    self_signed: bool = False
    # Ours: plain HTTP gets nothing (no listener) or only a redirect to HTTPS.
    plain_http: Literal["Refuse", "Redirect"] = "Refuse"

    @model_validator(mode="after")
    def _one_source(self) -> GatewayTls:
        if bool(self.certificate_refs) == self.self_signed:
            raise ValueError("tls needs exactly one of certificateRefs (1 to 8 kubernetes.io/tls Secrets) "
                             "or selfSigned: true")
        names = [r.name for r in self.certificate_refs]
        for i, name in enumerate(names):
            # The name becomes a volume and a mountPath (/etc/traefik/tls/<name>): only a Secret
            # name, which cannot hold '/' or '..', may.
            check_dns_subdomain(name, f"tls.certificateRefs[{i}].name (a Secret name)")
        if len(set(names)) != len(names):
            raise ValueError("tls.certificateRefs names a Secret more than once")
        return self


class ApiKeyAuth(ApiModel):
    secret_selector: LabelSelector

    @model_validator(mode="after")
    def _selects(self) -> ApiKeyAuth:
        if not self.secret_selector.match_labels:
            raise ValueError("auth.apiKey.secretSelector.matchLabels must name at least one label: "
                             "an empty selector would select every Secret")
        return self


class PerCallerLimits(ApiModel):
    """Ours: bounds per caller identity, across every ModelService of the gateway."""

    requests_per_minute: Annotated[int, Field(ge=1, le=1_000_000)] | None = None
    burst: Annotated[int, Field(ge=1, le=1_000_000)] | None = None
    in_flight: Annotated[int, Field(ge=1, le=100_000)] | None = None

    @model_validator(mode="after")
    def _burst(self) -> PerCallerLimits:
        if self.burst is not None and self.requests_per_minute is None:
            raise ValueError("limits.perCaller.burst needs requestsPerMinute")
        return self


class GatewayLimits(ApiModel):
    per_caller: PerCallerLimits


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
    limits: GatewayLimits | None = None
    service_selector: LabelSelector | None = None

    @model_validator(mode="after")
    def _limits(self) -> InferenceGatewaySpec:
        if self.limits is not None and self.auth is None:
            raise ValueError("limits.perCaller needs auth: callers are told apart by their API keys")
        return self

    @model_validator(mode="after")
    def _traefik(self) -> InferenceGatewaySpec:
        if self.backend == "Traefik" and self.traefik is None:
            raise ValueError("traefik (with version, the Traefik Helm chart version) is required when "
                             "backend is Traefik")
        return self


class InferenceGateway(KindObject):
    kind: Literal["InferenceGateway"]
    spec: InferenceGatewaySpec
