"""The two Traefik hops: each registers the manifests the core renders
(modelplane.render.gateway) and feeds its routes ConfigMap from the cluster plan, so a
re-run of the program changes routing without restarting Traefik."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pulumi
import pulumi_kubernetes as k8s

from components.k8s import RenderedObject
from modelplane.json_types import JsonMapping, JsonValue
from modelplane.render.gateway import dump, egress_name, routes_configmap
from modelplane.vocabulary import Manifest

WORKLOAD = "modelplane:index:WorkloadGateway"
CONTROL_PLANE = "modelplane:index:ControlPlaneGateway"


@dataclass(kw_only=True)
class TraefikGatewayArgs:
    type_token: str                        # WORKLOAD or CONTROL_PLANE
    cluster: str
    objects: Sequence[Manifest]            # the core's static ConfigMap, Deployment, Service (+ egress ConfigMap)
    # The routes ConfigMap's data (`routes_configmap(name, dynamic configuration)["data"]`),
    # from the plan. Text, not the configuration's dict: an Output's dict value is lifted
    # into an Output per nested value, which for a fleet's routes costs seconds.
    routes: pulumi.Output[Mapping[str, str]]
    # Live stacks: the egress configuration with the API keys, kept a secret end to end.
    egress_secret: pulumi.Input[JsonMapping] | None = None
    # Live stacks: the Secrets the gateway mounts (its hop certificate, the callers' key
    # hashes, a self-signed edge certificate), name -> string data, each a Pulumi secret;
    # `secret_labels`: labels a Secret carries (the callers', the auth's secretSelector).
    secrets: Mapping[str, pulumi.Input[Mapping[str, str]]] = field(default_factory=dict)
    secret_labels: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    props: JsonMapping = field(default_factory=dict)


def _egress_file(dynamic: JsonMapping) -> Mapping[str, pulumi.Input[str]] | None:
    return {"egress.yaml": dump(dynamic)}


def _address(status: JsonValue) -> str:
    ingress = (status.load_balancer.ingress if status and status.load_balancer else None) or []
    return (ingress[0].hostname or ingress[0].ip) if ingress else ""


class TraefikGateway(pulumi.ComponentResource):
    """One Traefik Deployment + Service in modelplane-system, configured from files."""

    service: k8s.core.v1.Service
    address: pulumi.Output[str]

    def __init__(self, name: str, args: TraefikGatewayArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(args.type_token, name, {"cluster": args.cluster, **args.props}, opts)
        child = pulumi.ResourceOptions(parent=self)
        meta = routes_configmap(name, {})["metadata"]
        configs: list[pulumi.Resource] = [k8s.core.v1.ConfigMap(
            f"{name}-routes", metadata=meta,
            data=args.routes, opts=child)]
        if args.egress_secret is not None:
            configs.append(k8s.core.v1.Secret(
                egress_name(name), metadata=k8s.meta.v1.ObjectMetaArgs(
                    name=egress_name(name), namespace=meta["namespace"], labels=meta["labels"]),
                string_data=pulumi.Output.secret(args.egress_secret).apply(_egress_file),
                opts=child))
        for secret_name, data in sorted(args.secrets.items()):
            configs.append(k8s.core.v1.Secret(
                secret_name, metadata=k8s.meta.v1.ObjectMetaArgs(
                    name=secret_name, namespace=meta["namespace"],
                    labels={**meta["labels"], **args.secret_labels.get(secret_name, {})}),
                string_data=pulumi.Output.secret(data), opts=child))
        for obj in args.objects:
            if obj["kind"] == "ConfigMap":
                configs.append(RenderedObject(obj["metadata"]["name"], obj, child))
        for obj in args.objects:
            if obj["kind"] == "Deployment":
                RenderedObject(name, obj, pulumi.ResourceOptions(parent=self, depends_on=configs))
            elif obj["kind"] == "Service":
                # Typed, for its status: a LoadBalancer's address is the gateway's URL.
                self.service = k8s.core.v1.Service(name, metadata=obj["metadata"], spec=obj["spec"], opts=child)
        self.address = self.service.status.apply(_address)
        self.register_outputs({"address": self.address})
