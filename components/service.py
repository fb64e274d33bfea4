"""ModelService and hand-written ModelEndpoint components: routing policy made visible
(props for policies, URL and per-endpoint weights as outputs)."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi

from modelplane.api import ModelEndpoint as EndpointSpec
from modelplane.api import ModelService as ServiceSpec
from modelplane.gateway.fleet import route_weights
from modelplane.json_types import JsonObject
from modelplane.plan import FleetPlan


@dataclass(kw_only=True)
class ModelServiceArgs:
    service: ServiceSpec
    plan: pulumi.Output[FleetPlan]
    base_url: pulumi.Input[str]       # the control-plane gateway's URL


class ModelService(pulumi.ComponentResource):
    url: pulumi.Output[str]
    weights: pulumi.Output[list[JsonObject]]

    def __init__(self, name: str, args: ModelServiceArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        service = args.service
        ns, sname = service.metadata.namespace or "default", service.metadata.name
        super().__init__("modelplane:index:ModelService", name,
                         {"namespace": ns, "name": sname, "manifest": service.to_manifest()}, opts)
        self.url = pulumi.Output.concat(args.base_url, f"/{ns}/{sname}")

        def weights(fp: FleetPlan) -> list[JsonObject]:
            route = fp.route(ns, sname)
            return route_weights(route) if route is not None else []

        self.weights = args.plan.apply(weights)
        self.register_outputs({"url": self.url, "weights": self.weights})


@dataclass(kw_only=True)
class ModelEndpointArgs:
    endpoint: EndpointSpec
    api_key: pulumi.Input[str | None] | None = None
    # GitOps: the key is the user's Secret to create, so none is configured.
    expects_key: bool = True


class ModelEndpoint(pulumi.ComponentResource):
    """A hand-written endpoint (an OpenAI-compatible SaaS). Its API key only ever lives
    in Pulumi secrets and the control-plane gateway's egress Secret."""

    api_key: pulumi.Output[str | None] | None

    def __init__(self, name: str, args: ModelEndpointArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        endpoint = args.endpoint
        ns = endpoint.metadata.namespace or "default"
        secret = endpoint.spec.api_key_secret
        props = {"namespace": ns, "name": endpoint.metadata.name, "baseUrl": endpoint.spec.base_url,
                 "credentialSecret": secret.name if secret else "", "manifest": endpoint.to_manifest()}
        super().__init__("modelplane:index:ModelEndpoint", name, props, opts)
        self.api_key = pulumi.Output.secret(args.api_key) if args.api_key is not None else None
        if secret is not None and args.api_key is None and args.expects_key:
            path = f"endpointApiKeys[\"{ns}/{secret.name}\"]"
            pulumi.log.warn(f"ModelEndpoint {ns}/{endpoint.metadata.name} names credential {secret.name!r} but no "
                            f"key is configured: `pulumi config set --secret --path '{path}' ...`", self)
        self.register_outputs({"baseUrl": endpoint.spec.base_url})
