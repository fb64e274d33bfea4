"""The whole fleet from typed arguments: what __main__ runs, and the entry point for
users who prefer code to stack YAML (`deploy_fleet(FleetArgs(fleet=load_manifests(...)))`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.args import ClusterAccess, FleetArgs
from components.cache import ModelCache, cache_clusters
from components.cluster import InferenceCluster, InferenceClusterArgs, control_cluster
from components.deployment import ModelDeployment, candidate_clusters
from components.gateway import control_plane_gateway, gateway_url, workload_gateway
from components.k8s import register_objects, resource_name
from components.report import deployment_outputs, placement_table, shortfalls
from components.routes import service_routes
from components.serving import ServingStack, modelexpress_objects
from components.service import ModelEndpoint, ModelService
from providers.placement import FleetPlacement, normalize_numbers

CONTROL_HOST_PORT = 8080  # Kind: the control-plane gateway on http://localhost:8080


@dataclass
class FleetResources:
    placement: FleetPlacement
    clusters: dict[str, InferenceCluster] = field(default_factory=dict)
    control: InferenceCluster | None = None
    deployments: dict[str, ModelDeployment] = field(default_factory=dict)
    services: dict[str, ModelService] = field(default_factory=dict)
    outputs: dict[str, Any] = field(default_factory=dict)


def _namespaces(fleet: Any, cluster: str, include_builtin: bool = False) -> set[str]:
    """Namespaces anything may be rendered into on a cluster (static, so namespaces do
    not come and go with replicas)."""
    from modelplane.render.namespace import BUILTIN_NAMESPACES

    used = {key[0] for key, dep in fleet.deployments.items() if cluster in candidate_clusters(fleet, dep)}
    used |= {key[0] for key, cache in fleet.caches.items() if cluster in cache_clusters(fleet, cache)}
    return used if include_builtin else used - BUILTIN_NAMESPACES


def _workload_cluster(name: str, spec: Any, args: FleetArgs) -> InferenceCluster:
    access = args.access.get(name, ClusterAccess())
    gw = args.fleet.control_gateway()
    hosts_control = gw is not None and gw.spec.cluster_name == name
    cargs = InferenceClusterArgs(cluster=spec, fleet=args.fleet, access=access, render_dir=args.render_dir,
                                 host_port=CONTROL_HOST_PORT if hosts_control else None, aws=args.aws, gcp=args.gcp)
    return InferenceCluster(name, cargs)


def _prepare_cluster(name: str, cluster: InferenceCluster, args: FleetArgs) -> list[pulumi.Resource]:
    """Serving stack and namespaces; returns what workloads on the cluster wait for."""
    from modelplane.render import render_mock_engine_configmap, render_namespace, ships_mock_engine

    fleet, spec = args.fleet, args.fleet.clusters[name]
    child = pulumi.ResourceOptions(parent=cluster, provider=cluster.provider, depends_on=[cluster.namespace])
    existing = spec.spec.cluster.existing
    provided = existing is not None and existing.components == "Provided"
    # components: Provided means the platform team already runs the serving stack there.
    stack = ServingStack(f"{name}-serving", spec, fleet, args.install_charts and not provided,
                         pulumi.ResourceOptions(parent=cluster, providers=[cluster.provider],
                                                depends_on=[cluster.namespace]))
    ready: list[pulumi.Resource] = [cluster.namespace, stack, *stack.ready]
    for ns in sorted(_namespaces(fleet, name)):
        obj = render_namespace(ns, name)
        ready.append(k8s.core.v1.Namespace(resource_name(name, "ns", ns), metadata=obj["metadata"], opts=child))
        if spec.spec.stack == "Dynamo":
            register_objects(name, modelexpress_objects(ns),
                             pulumi.ResourceOptions(parent=cluster, provider=cluster.provider, depends_on=list(ready)))
    if ships_mock_engine(spec):
        # Kind regions run the examples' mock engine from a stock image; its source
        # travels as a ConfigMap the engine pods mount (modelplane/render/mock_engine.py).
        for ns in sorted(_namespaces(fleet, name, include_builtin=True)):
            obj = render_mock_engine_configmap(ns, name)
            ready.append(k8s.core.v1.ConfigMap(
                resource_name(name, "mock-engine", ns), metadata=obj["metadata"], data=obj["data"],
                opts=pulumi.ResourceOptions(parent=cluster, provider=cluster.provider, depends_on=list(ready))))
    return ready


def _control(args: FleetArgs, clusters: dict[str, InferenceCluster]) -> tuple[str, InferenceCluster, bool]:
    gw = args.fleet.control_gateway()
    if gw is not None and (gw.spec.tls or gw.spec.auth):
        # Refuse rather than serve plain HTTP to callers who asked for TLS or API keys.
        raise ValueError(f"InferenceGateway {gw.metadata.name}: spec.tls and spec.auth are not implemented by this "
                         "program yet; remove them (the gateway serves plain HTTP without caller authentication) "
                         "or terminate TLS and authenticate in front of it")
    if gw is not None and gw.spec.cluster_name:
        if gw.spec.cluster_name not in clusters:
            raise ValueError(f"InferenceGateway {gw.metadata.name} names cluster {gw.spec.cluster_name!r}, "
                             "which is not in the fleet")
        name = gw.spec.cluster_name
        return name, clusters[name], args.fleet.clusters[name].source == "Kind"
    cp = args.control_plane
    kind = cp.source == "Kind"
    return cp.name, control_cluster(cp.name, cp.source, cp.node_image, cp.access, args.render_dir,
                                    CONTROL_HOST_PORT if kind else None), kind


def _control_address(args: FleetArgs, kind: bool, gateway) -> pulumi.Input[str]:
    if args.render_dir:
        # GitOps: nothing is deployed by this program, so give the in-cluster address.
        return "http://modelplane-gateway.modelplane-system.svc.cluster.local"
    if kind:
        return f"http://localhost:{CONTROL_HOST_PORT}"
    return gateway.address.apply(lambda a: f"http://{a}" if a else "")


def _gateway_urls(args: FleetArgs, gateways: dict) -> dict[str, pulumi.Input[str]]:
    urls: dict[str, pulumi.Input[str]] = {}
    for name, spec in args.fleet.clusters.items():
        known = gateway_url(spec)
        if known is not None:
            urls[name] = known
        elif args.render_dir:
            pulumi.log.warn(f"InferenceCluster {name}: no spec.gateway.hostname, so the rendered control-plane "
                            "routes cannot name its gateway; set one for the GitOps path")
            urls[name] = f"http://{name}.gateway.invalid"
        else:
            urls[name] = gateways[name].address.apply(lambda a: f"http://{a}")
    return urls


def _report(placement: dict) -> dict:
    pulumi.log.info(placement_table(placement))
    for message in shortfalls(placement):
        pulumi.log.warn(message)
    return placement


def _warn_rendered_secrets(args: FleetArgs) -> None:
    """The Kubernetes provider writes Secrets in plain text when rendering to a directory."""
    fleet = args.fleet
    names = [f"the HF token of ModelCache {ns}/{n}" for (ns, n), c in sorted(fleet.caches.items())
             if c.spec.hugging_face.auth_secret is not None and args.hf_token is not None]
    names += [f"the API key of ModelEndpoint {ns}/{n}" for (ns, n), e in sorted(fleet.endpoints.items())
              if e.spec.api_key_secret is not None]
    if args.render_dir and names:
        pulumi.log.warn(f"renderDir: {', '.join(names)} will be written in plain text under {args.render_dir} "
                        "(Pulumi state keeps them encrypted). Keep that directory out of git, or deliver those "
                        "Secrets with a secret store instead.")


def deploy_fleet(args: FleetArgs) -> FleetResources:
    fleet = args.fleet
    _warn_rendered_secrets(args)
    placement = FleetPlacement("fleet-placement", fleet.to_documents(), args.accounting, args.observed)
    res = FleetResources(placement=placement)
    placed = placement.placement.apply(lambda p: _report(normalize_numbers(p)))
    ready: dict[str, list[pulumi.Resource]] = {}
    for name, spec in sorted(fleet.clusters.items()):
        res.clusters[name] = _workload_cluster(name, spec, args)
        ready[name] = _prepare_cluster(name, res.clusters[name], args)
    for key, cache in sorted(fleet.caches.items()):
        ModelCache(resource_name("cache", *key), fleet, cache, res.clusters, args.hf_token, ready)
    for key, dep in sorted(fleet.deployments.items()):
        res.deployments["/".join(key)] = ModelDeployment(resource_name(*key), fleet, dep, placed, res.clusters, ready)
    routes = placed.apply(lambda p: service_routes(fleet, p))
    gateways = {name: workload_gateway(fleet.clusters[name], routes, c.provider, ready[name], parent=c)
                for name, c in res.clusters.items()}
    control_name, res.control, kind = _control(args, res.clusters)
    api_keys = args.endpoint_api_keys or {}
    for key, ep in sorted(fleet.endpoints.items()):
        secret = ep.spec.api_key_secret
        key_out = (pulumi.Output.from_input(api_keys).apply(lambda k, s=f"{key[0]}/{secret.name}": (k or {}).get(s))
                   if secret else None)
        ModelEndpoint(resource_name("endpoint", *key), ep, key_out)
    static_routes = service_routes(fleet, {"deployments": []})
    cp_gateway = control_plane_gateway(
        "modelplane-gateway", control_name, routes, static_routes, _gateway_urls(args, gateways), api_keys,
        kind, res.control.provider, [res.control.namespace], parent=res.control)
    base = _control_address(args, kind, cp_gateway)
    for key, svc in sorted(fleet.services.items()):
        res.services["/".join(key)] = ModelService(resource_name("service", *key), svc, routes, base)
    res.outputs = {
        "placement": placed,
        "deployments": placed.apply(deployment_outputs),
        "services": {k: {"url": s.url, "weights": s.weights} for k, s in res.services.items()},
        "gatewayUrl": base,
    }
    return res
