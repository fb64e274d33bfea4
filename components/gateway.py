"""The two Traefik hops, deployed with the file provider (traefik-findings §5): the
dynamic configuration the data-path builders produce is a ConfigMap (and, for API
keys, a Secret) projected into the directory Traefik watches, so a re-run of the
program changes routing without restarting Traefik."""

from __future__ import annotations

from typing import Any, Mapping

import pulumi
import pulumi_kubernetes as k8s
import yaml

from components.labels import k8s_labels
from components.pool_labels import NAMESPACE

# The configuration (retry on 502-504, failover services) was measured on Traefik 3.7.15;
# an older image rejects the whole file, so the deployed gateway runs the tested version.
TRAEFIK_IMAGE = "traefik:v3.7.15"
WEB_PORT = 8000
# Kind: fixed NodePorts; the control plane reaches workload gateways on the first, and
# the host reaches the control-plane gateway on the second (see sources/kind.py).
NODE_PORT = 30080
CONTROL_NODE_PORT = 30081
CONFIG_DIR = "/etc/traefik/dynamic"
EGRESS_BASE_PORT = 9100


def _dump(cfg: Mapping[str, Any]) -> str:
    return yaml.safe_dump(cfg, sort_keys=True)


def gateway_url(cluster: Any) -> str | None:
    """How the control plane reaches a workload cluster's gateway, when it is known
    before the cluster exists (a declared hostname, or a Kind node's name)."""
    if cluster.spec.gateway is not None and cluster.spec.gateway.hostname:
        return f"http://{cluster.spec.gateway.hostname}"
    if cluster.source == "Kind":
        # Kind nodes are containers on one docker network, resolvable by name.
        return f"http://{cluster.metadata.name}-control-plane:{NODE_PORT}"
    return None


def service_address(svc: k8s.core.v1.Service) -> pulumi.Output[str]:
    def first(status) -> str:
        ingress = (status.load_balancer.ingress if status and status.load_balancer else None) or []
        return (ingress[0].hostname or ingress[0].ip) if ingress else ""
    return svc.status.apply(first)


class TraefikGateway(pulumi.ComponentResource):
    """One Traefik Deployment + Service in modelplane-system, configured from files."""

    service: k8s.core.v1.Service
    address: pulumi.Output[str]

    def __init__(self, token: str, name: str, dynamic: pulumi.Input[dict], node_port: int | None,
                 props: dict, secret_dynamic: pulumi.Input[dict] | None = None,
                 extra_entrypoints: Mapping[str, str] | None = None,
                 opts: pulumi.ResourceOptions | None = None):
        super().__init__(token, name, props, opts)
        from modelplane.gateway.config import static_config

        labels = k8s_labels("gateway", {"app": name})
        meta = {"namespace": NAMESPACE, "labels": labels}
        child = pulumi.ResourceOptions(parent=self)
        static = static_config(f":{WEB_PORT}", CONFIG_DIR, extra_entrypoints)
        static_cm = k8s.core.v1.ConfigMap(f"{name}-static", metadata={**meta, "name": f"{name}-static"},
                                          data={"traefik.yaml": _dump(static)}, opts=child)
        routes_cm = k8s.core.v1.ConfigMap(f"{name}-routes", metadata={**meta, "name": f"{name}-routes"},
                                          data=pulumi.Output.from_input(dynamic).apply(lambda d: {"routes.yaml": _dump(d)}),
                                          opts=child)
        sources = [{"configMap": {"name": f"{name}-routes"}}]
        deps = [static_cm, routes_cm]
        if secret_dynamic is not None:
            secret = k8s.core.v1.Secret(
                f"{name}-egress", metadata={**meta, "name": f"{name}-egress"},
                string_data=pulumi.Output.secret(secret_dynamic).apply(lambda d: {"egress.yaml": _dump(d)}),
                opts=child)
            sources.append({"secret": {"name": f"{name}-egress"}})
            deps.append(secret)
        container = {
            "name": "traefik", "image": TRAEFIK_IMAGE, "args": ["--configFile=/etc/traefik/static/traefik.yaml"],
            "ports": [{"name": "web", "containerPort": WEB_PORT}],
            "readinessProbe": {"tcpSocket": {"port": WEB_PORT}, "periodSeconds": 5},
            "volumeMounts": [{"name": "static", "mountPath": "/etc/traefik/static"},
                             {"name": "dynamic", "mountPath": CONFIG_DIR}],
        }
        k8s.apps.v1.Deployment(name, metadata={**meta, "name": name}, spec={
            "replicas": 1, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": labels}, "spec": {
                "containers": [container],
                "volumes": [{"name": "static", "configMap": {"name": f"{name}-static"}},
                            {"name": "dynamic", "projected": {"sources": sources}}]}}},
            opts=pulumi.ResourceOptions(parent=self, depends_on=deps))
        port: dict = {"name": "web", "port": 80, "targetPort": WEB_PORT}
        if node_port:
            port["nodePort"] = node_port
        # A LoadBalancer Service is awaited until it has an address, which the service
        # URLs and the control plane's routes need.
        self.service = k8s.core.v1.Service(name, metadata={**meta, "name": name}, spec={
            "type": "NodePort" if node_port else "LoadBalancer", "selector": {"app": name}, "ports": [port]},
            opts=child)
        self.address = service_address(self.service)
        self.register_outputs({"address": self.address})


def workload_gateway(cluster: Any, routes: pulumi.Output[list], provider: pulumi.ProviderResource,
                     depends_on: list[pulumi.Resource], parent: pulumi.Resource | None = None) -> TraefikGateway:
    from modelplane.gateway.config import workload_config

    name = cluster.metadata.name
    dynamic = routes.apply(lambda rs: workload_config(name, rs))
    return TraefikGateway("modelplane:index:WorkloadGateway", f"{name}-gateway", dynamic,
                          node_port=NODE_PORT if cluster.source == "Kind" else None, props={"cluster": name},
                          opts=pulumi.ResourceOptions(parent=parent, providers=[provider], depends_on=depends_on))


def egress_ports(routes: list) -> dict[str, int]:
    from modelplane.gateway.config import egress_entrypoint, external_endpoints

    return {egress_entrypoint(ep): EGRESS_BASE_PORT + i for i, ep in enumerate(external_endpoints(routes))}


def control_plane_gateway(name: str, cluster_name: str, routes: pulumi.Output[list], static_routes: list,
                          gateway_urls: Mapping[str, pulumi.Input[str]], api_keys: pulumi.Input[Mapping[str, str]],
                          kind: bool, provider: pulumi.ProviderResource, depends_on: list[pulumi.Resource],
                          parent: pulumi.Resource | None = None) -> TraefikGateway:
    """`static_routes` decide the egress entrypoints (one per external endpoint), which
    live in the static config; hand-written endpoints do not depend on the placement."""
    from modelplane.gateway.config import (control_plane_config, egress_config, egress_entrypoint,
                                           external_endpoints)

    ports = egress_ports(static_routes)
    urls = {ep.key: f"http://127.0.0.1:{ports[egress_entrypoint(ep)]}" for ep in external_endpoints(static_routes)}
    dynamic = pulumi.Output.all(routes, pulumi.Output.all(**gateway_urls) if gateway_urls else {}).apply(
        lambda a: control_plane_config(a[0], a[1], urls))
    secret_dynamic = None
    if urls:
        def egress(args) -> dict:
            rs, keys = args
            def lookup(namespace, credential):
                key = f"{namespace}/{credential.secret_name}"
                if key not in (keys or {}):
                    raise ValueError(f"no API key for {key}: `pulumi config set --secret --path "
                                     f"'endpointApiKeys[\"{key}\"]' <key>`")
                return keys[key]
            return egress_config(rs, lookup)
        secret_dynamic = pulumi.Output.secret(pulumi.Output.all(routes, api_keys or {}).apply(egress))
    return TraefikGateway("modelplane:index:ControlPlaneGateway", name, dynamic,
                          node_port=CONTROL_NODE_PORT if kind else None,
                          props={"cluster": cluster_name, "egress": sorted(ports)}, secret_dynamic=secret_dynamic,
                          extra_entrypoints={n: f"127.0.0.1:{p}" for n, p in ports.items()},
                          opts=pulumi.ResourceOptions(parent=parent, providers=[provider], depends_on=depends_on))
