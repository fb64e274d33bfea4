"""ModelService and hand-written ModelEndpoint components: routing policy made visible
(props for policies, URL and per-endpoint weights as outputs)."""

from __future__ import annotations

from typing import Any

import pulumi

from components.routes import weights_summary


class ModelService(pulumi.ComponentResource):
    url: pulumi.Output[str]
    weights: pulumi.Output[list]

    def __init__(self, name: str, service: Any, routes: pulumi.Output[list], base_url: pulumi.Input[str],
                 opts: pulumi.ResourceOptions | None = None):
        ns, sname = service.metadata.namespace or "default", service.metadata.name
        super().__init__("modelplane:index:ModelService", name,
                         {"namespace": ns, "name": sname, "manifest": service.to_manifest()}, opts)
        self.url = pulumi.Output.concat(base_url, f"/{ns}/{sname}")
        self.weights = routes.apply(lambda rs: next(
            (weights_summary(r) for r in rs if (r.namespace, r.name) == (ns, sname)), []))
        self.register_outputs({"url": self.url, "weights": self.weights})


class ModelEndpoint(pulumi.ComponentResource):
    """A hand-written endpoint (an OpenAI-compatible SaaS). Its API key only ever lives
    in Pulumi secrets and the control-plane gateway's egress Secret."""

    api_key: pulumi.Output[str] | None

    def __init__(self, name: str, endpoint: Any, api_key: pulumi.Input[str] | None,
                 opts: pulumi.ResourceOptions | None = None):
        ns = endpoint.metadata.namespace or "default"
        secret = endpoint.spec.api_key_secret
        props = {"namespace": ns, "name": endpoint.metadata.name, "baseUrl": endpoint.spec.base_url,
                 "credentialSecret": secret.name if secret else "", "manifest": endpoint.to_manifest()}
        super().__init__("modelplane:index:ModelEndpoint", name, props, opts)
        self.api_key = pulumi.Output.secret(api_key) if api_key is not None else None
        if secret is not None and api_key is None:
            pulumi.log.warn(f"ModelEndpoint {ns}/{endpoint.metadata.name} names credential {secret.name!r} but no "
                            f"key is configured: `pulumi config set --secret --path 'endpointApiKeys[\"{ns}/{secret.name}\"]' ...`",
                            self)
        self.register_outputs({"baseUrl": endpoint.spec.base_url})
