"""ModelplaneFleet: the whole fleet as one component, so `pulumi preview` shows one tree.

It places the fleet (the placement resource), turns the placement into typed objects
once and plans every cluster with the core (`modelplane.plan.plan_fleet`); the other
components only register what that plan holds. Also the entry point for users who
prefer code to stack YAML (`deploy_fleet(FleetArgs(fleet=load_manifests(...)))`).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

import pulumi

from components.args import ClusterAccess, FleetArgs
from components.cache import ModelCache, ModelCacheArgs
from components.cluster import InferenceCluster, InferenceClusterArgs, control_cluster
from components.deployment import ModelDeployment, ModelDeploymentArgs
from components.errors import ResourceError
from components.gateway import CONTROL_PLANE, WORKLOAD, TraefikGateway, TraefikGatewayArgs
from components.k8s import RenderedObject, object_name, resource_name
from components.observe import placement_observe
from components.service import ModelEndpoint, ModelEndpointArgs, ModelService, ModelServiceArgs
from components.serving import ServingStack, ServingStackArgs
from modelplane.gateway.config import egress_config
from modelplane.plan import (
    ClusterFoundation,
    ClusterPlan,
    ControlPlan,
    ControlPlane,
    FleetPlan,
    gitops_gateway_urls,
    plan_control,
    plan_fleet,
    plan_foundation,
)
from modelplane.render import RenderError
from modelplane.render.gateway import EgressMode, egress_ports, in_cluster_url, static_gateway_url
from modelplane.routing import Credential
from modelplane.scheduler import FleetPlacement, PlacementFormatError, candidate_clusters
from modelplane.scheduler.report import deployment_outputs, format_table, shortfalls
from providers.placement import FleetPlacementArgs, FleetPlacementResource, normalize_numbers

TYPE = "modelplane:index:ModelplaneFleet"
CONTROL_HOST_PORT = 8080  # Kind: the control-plane gateway on http://localhost:8080
# The components below were stack children before this root existed; the alias keeps
# their URNs (and, through them, their children's), so existing stacks replace nothing.
WAS_TOP_LEVEL = [pulumi.Alias(parent=pulumi.ROOT_STACK_RESOURCE)]


class ModelplaneFleet(pulumi.ComponentResource):
    """The root component. Attributes (annotated in __init__: Pulumi reads class-level
    annotations as the types of props and outputs): `placement` (the placement resource),
    `plan` (Output[FleetPlan]), `clusters`, `control`, `deployments`, `services`, `outputs`."""

    def __init__(self, name: str, args: FleetArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        fleet = args.fleet
        super().__init__(TYPE, name, {"clusters": sorted(fleet.clusters), "renderDir": args.render_dir or ""}, opts)
        top = pulumi.ResourceOptions(parent=self, aliases=WAS_TOP_LEVEL)
        # GitOps output never holds a secret: Secrets are referenced and the user creates them.
        egress: EgressMode = "reference" if args.render_dir else "secret"
        try:
            control = plan_control(fleet, control_spec(args), egress)
        except RenderError as exc:
            raise ResourceError(str(exc), self) from None
        self.placement: FleetPlacementResource = FleetPlacementResource(
            "fleet-placement", FleetPlacementArgs(
                fleet_documents=fleet.to_documents(), accounting=args.accounting, observed=args.observed,
                observe=placement_observe(args.observe, args.access)), top)

        def plan(raw: Mapping[str, Any]) -> FleetPlan:
            try:
                fp = plan_fleet(fleet, FleetPlacement.from_json(normalize_numbers(raw)), control_spec(args), egress)
            except (RenderError, PlacementFormatError) as exc:
                raise ResourceError(str(exc), self) from None
            _report(fp, args)
            return fp

        self.plan: pulumi.Output[FleetPlan] = self.placement.placement.apply(plan)
        candidates = candidate_clusters(fleet)
        self.clusters: dict[str, InferenceCluster] = {}
        ready: dict[str, pulumi.Output[list[pulumi.Resource]]] = {}
        gateways: dict[str, TraefikGateway] = {}
        for cname, spec in sorted(fleet.clusters.items()):
            foundation = plan_foundation(fleet, cname)
            cluster = self.clusters[cname] = InferenceCluster(cname, InferenceClusterArgs(
                cluster=spec, fleet=fleet, foundation=foundation, access=args.access.get(cname, ClusterAccess()),
                render_dir=args.render_dir,
                host_port=CONTROL_HOST_PORT if control.in_fleet and control.kind and control.cluster == cname else None,
                aws=args.aws, gcp=args.gcp), top)
            ready[cname] = self._prepare(foundation, cluster, args)
            routes = self.plan.apply(functools.partial(_gateway_config, cname))
            gateways[cname] = TraefikGateway(foundation.gateway_name, TraefikGatewayArgs(
                type_token=WORKLOAD, cluster=cname, objects=foundation.gateway, routes=routes),
                pulumi.ResourceOptions(parent=cluster, providers=[cluster.provider], depends_on=ready[cname]))
        providers = {c: cluster.provider for c, cluster in self.clusters.items()}
        for key, cache in sorted(fleet.caches.items()):
            ModelCache(resource_name("cache", *key), ModelCacheArgs(
                cache=cache, plan=self.plan, providers=providers, ready=ready, hf_token=args.hf_token,
                write_secrets=not args.render_dir), top)
        self.deployments: dict[str, ModelDeployment] = {}
        for key, dep in sorted(fleet.deployments.items()):
            self.deployments["/".join(key)] = ModelDeployment(resource_name(*key), ModelDeploymentArgs(
                deployment=dep, plan=self.plan, candidates=candidates[key], providers=providers, ready=ready), top)
        self.control: InferenceCluster = (self.clusters[control.cluster] if control.in_fleet else control_cluster(
            args.control_plane, render_dir=args.render_dir, host_port=CONTROL_HOST_PORT if control.kind else None,
            opts=top))
        api_keys = pulumi.Output.from_input(args.endpoint_api_keys or {})
        for key, ep in sorted(fleet.endpoints.items()):
            secret = ep.spec.api_key_secret
            key_out = api_keys.apply(functools.partial(_api_key, f"{key[0]}/{secret.name}")) if secret else None
            ModelEndpoint(resource_name("endpoint", *key), ModelEndpointArgs(
                endpoint=ep, api_key=None if args.render_dir else key_out, expects_key=not args.render_dir), top)
        cp_gateway = TraefikGateway(control.name, TraefikGatewayArgs(
            type_token=CONTROL_PLANE, cluster=control.cluster, objects=control.gateway,
            routes=pulumi.Output.all(self.plan, self._gateway_urls(args, gateways)).apply(
                lambda a: control.routes_config(a[0].routes, a[1])),
            egress_secret=self._egress_secret(control, api_keys) if control.egress_mode == "secret" else None,
            props={"egress": sorted(egress_ports(control.static_routes))}),
            pulumi.ResourceOptions(parent=self.control, providers=[self.control.provider],
                                   depends_on=[self.control.namespace]))
        base = _control_address(args, control, cp_gateway)
        self.services: dict[str, ModelService] = {}
        for key, svc in sorted(fleet.services.items()):
            self.services["/".join(key)] = ModelService(resource_name("service", *key), ModelServiceArgs(
                service=svc, plan=self.plan, base_url=base), top)
        self.outputs: dict[str, Any] = {
            "placement": self.placement.placement.apply(normalize_numbers),
            "deployments": self.plan.apply(lambda fp: deployment_outputs(fp.placement)),
            "services": {k: {"url": s.url, "weights": s.weights} for k, s in self.services.items()},
            "gatewayUrl": base,
        }
        self.register_outputs(self.outputs)

    def _prepare(self, foundation: ClusterFoundation, cluster: InferenceCluster, args: FleetArgs
                 ) -> pulumi.Output[list[pulumi.Resource]]:
        """Serving stack, namespaces and per-namespace support objects; returns what the
        cluster's workloads wait for."""
        name = foundation.name
        spec = args.fleet.clusters[name]
        existing = spec.spec.cluster.existing
        # components: Provided means the platform team already runs the serving stack there.
        provided = existing is not None and existing.components == "Provided"
        stack = ServingStack(f"{name}-serving", ServingStackArgs(
            cluster=name, stack=spec.spec.stack, charts=foundation.charts, kai_queue=foundation.kai_queue,
            install_charts=args.install_charts and not provided),
            pulumi.ResourceOptions(parent=cluster, providers=[cluster.provider], depends_on=[cluster.namespace]))
        static: list[pulumi.Resource] = [cluster.namespace, stack, *stack.ready]

        def register(fp: FleetPlan) -> list[pulumi.Resource]:
            return _register_cluster_objects(fp.clusters[name], cluster, static)

        return self.plan.apply(register)

    def _gateway_urls(self, args: FleetArgs, gateways: Mapping[str, TraefikGateway]) -> pulumi.Output[dict[str, str]]:
        if args.render_dir:
            return pulumi.Output.from_input(gitops_gateway_urls(args.fleet)[0])
        urls: dict[str, pulumi.Input[str]] = {}
        for name, spec in args.fleet.clusters.items():
            known = static_gateway_url(spec)
            urls[name] = known if known is not None else gateways[name].address.apply(lambda a: f"http://{a}")
        return pulumi.Output.all(**urls) if urls else pulumi.Output.from_input({})

    def _egress_secret(self, control: ControlPlan, api_keys: pulumi.Output[Mapping[str, str]]
                       ) -> pulumi.Output[dict[str, Any]]:
        def egress(keys: Mapping[str, str] | None) -> dict[str, Any]:
            def lookup(namespace: str, credential: Credential) -> str:
                key = f"{namespace}/{credential.secret_name}"
                if key not in (keys or {}):
                    raise ResourceError(f"no API key for {key}: `pulumi config set --secret --path "
                                        f"'endpointApiKeys[\"{key}\"]' <key>`", self)
                return (keys or {})[key]
            return egress_config(control.static_routes, lookup)
        return pulumi.Output.secret(api_keys.apply(egress))


def _gateway_config(cluster: str, fp: FleetPlan) -> dict[str, Any]:
    return fp.clusters[cluster].gateway_config


def _api_key(key: str, keys: Mapping[str, str] | None) -> str | None:
    return (keys or {}).get(key)


def control_spec(args: FleetArgs) -> ControlPlane:
    return ControlPlane(args.control_plane.name, args.control_plane.source)


def _register_cluster_objects(plan: ClusterPlan, cluster: InferenceCluster,
                              static: Sequence[pulumi.Resource]) -> list[pulumi.Resource]:
    """Namespaces, ModelExpress and the mock engine's ConfigMaps, parented to the cluster
    (resource names as before the plan existed, so stacks keep them)."""
    name = plan.name

    def child(deps: Sequence[pulumi.Resource]) -> pulumi.ResourceOptions:
        return pulumi.ResourceOptions(parent=cluster, provider=cluster.provider, depends_on=list(deps))

    ready: list[pulumi.Resource] = list(static)
    for obj in plan.namespaces:
        ready.append(RenderedObject(resource_name(name, "ns", obj["metadata"]["name"]), obj, child(static)))
    for obj in plan.modelexpress:
        RenderedObject(object_name(name, obj), obj, child(ready))
    for obj in plan.mock_engine:
        mock = resource_name(name, "mock-engine", obj["metadata"]["namespace"])
        ready.append(RenderedObject(mock, obj, child(ready)))
    return ready


def _report(fp: FleetPlan, args: FleetArgs) -> None:
    """The placement table and shortfalls in `pulumi preview`, and what GitOps users must add."""
    pulumi.log.info("placement:\n" + format_table(fp.placement, args.accounting))
    for message in shortfalls(fp.placement):
        pulumi.log.warn(message)
    if args.render_dir:
        for warning in gitops_gateway_urls(args.fleet)[1]:
            pulumi.log.warn(warning)
        if fp.secrets:
            pulumi.log.warn(f"renderDir: {len(fp.secrets)} Secret(s) are referenced but never written under "
                            f"{args.render_dir}; create them in the clusters (docs/pulumi-program.md): "
                            + "; ".join(s.describe() for s in fp.secrets))


def _control_address(args: FleetArgs, control: ControlPlan, gateway: TraefikGateway) -> pulumi.Input[str]:
    if args.render_dir:
        # GitOps: nothing is deployed by this program, so give the in-cluster address.
        return in_cluster_url(control.name)
    if control.kind:
        return f"http://localhost:{CONTROL_HOST_PORT}"
    return gateway.address.apply(lambda a: f"http://{a}" if a else "")


def deploy_fleet(args: FleetArgs, name: str = "modelplane") -> ModelplaneFleet:
    return ModelplaneFleet(name, args)
