"""What every role of `ModelplaneFleet` shares: the component itself (type token, props, the
plan of the control plane), and the helpers that register each part (the placement resource, the
clusters with their serving stacks and gateways, the certificates, the control-plane gateway, the
services and endpoints). The roles (one stack, fleet stack, shard stack) are the subclasses in
this package; each calls these helpers in its own order and nothing else registers a resource.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import pulumi

from components.args import ClusterAccess, FleetArgs
from components.autoscale import autoscale_input, autoscaling_output, format_autoscaling
from components.cache import ModelCache, ModelCacheArgs
from components.certificates import DataPathCertificates, DataPathCertificatesArgs
from components.cluster import InferenceCluster, InferenceClusterArgs, control_cluster
from components.deployment import ModelDeployment, ModelDeploymentArgs
from components.errors import ResourceError
from components.gateway import CONTROL_PLANE, WORKLOAD, TraefikGateway, TraefikGatewayArgs
from components.k8s import ClusterReady, RenderedObject, object_name, resource_name
from components.observe import observation, placement_observe
from components.outputs import joined
from components.service import ModelEndpoint, ModelEndpointArgs, ModelService, ModelServiceArgs
from components.serving import ServingStack, ServingStackArgs
from components.sim import sim_options
from components.split import (
    SHARES_OUTPUT,
    shares_digests,
    shares_text,
    write_shares_file,
)
from modelplane.autoscale.state import ScalingState, StateFormatError
from modelplane.engine_json import normalize_numbers
from modelplane.gateway.config import egress_config
from modelplane.json_types import JsonMapping, JsonObject, JsonValue
from modelplane.plan import (
    ClusterFoundation,
    ClusterPlan,
    ControlPlan,
    ControlPlane,
    FleetPlan,
    SecretNeed,
    fleet_routes_for,
    gitops_gateway_urls,
    plan_control,
    plan_fleet,
    plan_foundation,
)
from modelplane.plan.gateway import callers_secret_data, edge_names
from modelplane.plan.share import stack_layout
from modelplane.render import RenderError
from modelplane.render.gateway import (
    EGRESS_ROOTS,
    SELF_SIGNED_SECRET,
    EgressMode,
    callers_secret_name,
    egress_ports,
    hop_names,
    hop_secret_name,
    in_cluster_url,
    routes_configmap,
    static_gateway_url,
    workload_gateway_name,
)
from modelplane.render.serving import bind_eks_cluster_name
from modelplane.routing import Credential
from modelplane.scheduler import FleetPlacement, PlacementFormatError
from modelplane.scheduler.placement_report import deployment_outputs, format_table, shortfalls
from providers.placement import FleetPlacementArgs, FleetPlacementResource
from providers.rendered_files import ServingStackFiles

TYPE = "modelplane:index:ModelplaneFleet"
CONTROL_HOST_PORT = 8080  # Kind: the control-plane gateway on http://localhost:8080
# The components below were stack children before this root existed; the alias keeps
# their URNs (and, through them, their children's), so existing stacks replace nothing.
WAS_TOP_LEVEL = [pulumi.Alias(parent=pulumi.ROOT_STACK_RESOURCE)]
LARGE_OUTPUTS = ("placement", SHARES_OUTPUT)
HopCa = tuple[pulumi.Output[str], pulumi.Output[str]]   # (certificate, key): components.certificates.fleet_hop_ca


@dataclass(frozen=True)
class _Decision:
    """What the fleet stack derives from one placement: the plan of what is fleet-wide and
    every shard's share (JSON text)."""

    plan: FleetPlan
    shares: Mapping[str, str]


class ModelplaneFleet(pulumi.ComponentResource):
    """The root component, of one role (deploy_fleet picks it). Attributes (annotated in __init__:
    Pulumi reads class-level annotations as the types of props and outputs): `placement` (the
    placement resource; None in a shard stack), `plan` (Output[FleetPlan]), `clusters`, `control`
    (where the control-plane gateway is registered), `deployments` (in a shard stack filled once its
    share is known), `services`, `outputs`."""

    def __init__(self, name: str, args: FleetArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        fleet, split = args.fleet, args.split
        props: JsonObject = {"clusters": sorted(fleet.clusters), "renderDir": args.render_dir or ""}
        if split is not None:
            props["split"] = {"role": split.role, "shardSize": split.shard_size, "shard": split.shard}
        super().__init__(TYPE, name, props, sim_options(args.sim, opts))
        self.args = args
        self.top = pulumi.ResourceOptions(parent=self, aliases=WAS_TOP_LEVEL)
        # GitOps output never holds a secret: Secrets are referenced and the user creates them.
        self.egress: EgressMode = "reference" if args.render_dir else "secret"
        try:
            self.control_plan = plan_control(fleet, control_spec(args), self.egress)
            self.layout = stack_layout(fleet, self.control_plan.cluster, split.shard_size) if split else None
        except RenderError as exc:
            raise ResourceError(str(exc), self) from None
        self.placement: FleetPlacementResource | None = None
        self.observe = placement_observe(args.observe, args.access)       # read the clusters (docs/observe.md)
        self.outputs: JsonObject = {}
        self.plan: pulumi.Output[FleetPlan]
        self.clusters: dict[str, InferenceCluster] = {}
        self.deployments: dict[str, ModelDeployment] = {}
        self.services: dict[str, ModelService] = {}
        self.certificates: DataPathCertificates | None = None

    def _finish(self) -> None:
        # The stack exports every output (__main__.py); the component's own state keeps the
        # small ones, not a second copy of the placement or the shares (state size at scale,
        # benchmarks/scale.py).
        self.register_outputs({k: v for k, v in self.outputs.items() if k not in LARGE_OUTPUTS})

    def _place(self) -> pulumi.Output[_Decision]:
        """The placement resource and what this stack derives from its placement (one stack and
        fleet stack); also the `autoscaling` and `deployments` outputs."""
        args = self.args
        autoscale = autoscale_input(args.fleet, args.autoscale)
        self.placement = FleetPlacementResource(
            "fleet-placement", FleetPlacementArgs(
                fleet_documents=args.fleet.to_documents(), accounting=args.accounting, observed=args.observed,
                observe=self.observe, autoscale=autoscale), self.top)
        scaling = self.placement.autoscaling if autoscale is not None else pulumi.Output.from_input(None)
        decision = joined(self.placement.placement, scaling).apply(lambda a: self._decide(a[0], a[1]))
        if autoscale is not None:
            self.outputs["autoscaling"] = scaling.apply(lambda raw: autoscaling_output(_scaling(raw)))
        self.plan = decision.apply(lambda d: d.plan)
        self.outputs["deployments"] = self.plan.apply(lambda fp: deployment_outputs(fp.placement))
        return decision

    def _observation(self) -> FleetPlacementResource | None:
        """The `observation` output (what check() read, docs/observe.md); the placement resource
        when the clusters are read, else None."""
        if self.observe is None or self.placement is None:
            return None
        self.outputs["observation"] = observation(self.placement.capacity, self.placement.health)
        return self.placement

    def _certificates(self, here: Sequence[str], *, hosts_control: bool,
                      ca: Callable[[], HopCa] | None = None) -> DataPathCertificates:
        """The certificates of this stack's gateways, under the hop CA `ca()` returns (a shard
        stack: the fleet stack's) or one made here."""
        fleet, control = self.args.fleet, self.control_plan
        self_signed: list[str] = []
        if hosts_control and control.edge.self_signed:
            if not (control.kind or self.args.sim):
                raise ResourceError(f"InferenceGateway spec.tls.selfSigned is for the kind, sim and render stacks "
                                    f"(control plane {control.cluster} is not a Kind cluster): give it "
                                    "certificateRefs (kubernetes.io/tls Secrets in modelplane-system)", self)
            self_signed = edge_names(fleet)
            pulumi.log.warn("the control-plane gateway's edge certificate is self-signed (generated by the program): "
                            "clients must be given it to trust (`pulumi stack output` does not show it; read the "
                            f"Secret {SELF_SIGNED_SECRET} in modelplane-system)")
        self.certificates = DataPathCertificates("data-path-certificates", DataPathCertificatesArgs(
            gateways={workload_gateway_name(c): hop_names(fleet.clusters[c]) for c in here},
            control=control.name if hosts_control else None, self_signed=self_signed, ca=ca() if ca else None),
            self.top)
        return self.certificates

    def _control_secrets(self) -> dict[str, pulumi.Input[Mapping[str, str]]]:
        """The Secrets the control-plane gateway mounts that the program makes (live stacks)."""
        control = self.control_plan
        if self.certificates is None:
            return {}
        secrets: dict[str, pulumi.Input[Mapping[str, str]]] = {
            hop_secret_name(control.name): self.certificates.hop_secret(control.name)}
        if self.certificates.edge is not None:
            secrets[SELF_SIGNED_SECRET] = self.certificates.edge_secret()
        if control.edge.auth:
            def callers(keys: Mapping[str, str] | None) -> dict[str, str]:
                if not keys:
                    pulumi.log.warn("InferenceGateway spec.auth is set but stack config gatewayApiKeys names no "
                                    "caller: every request will be refused (401) until one is set "
                                    "(`pulumi config set --secret --path 'gatewayApiKeys.<caller>' <key>`)")
                try:
                    return callers_secret_data(dict(keys or {}))
                except RenderError as exc:
                    raise ResourceError(str(exc), self) from None
            keys = pulumi.Output.from_input(self.args.gateway_api_keys or {})
            secrets[callers_secret_name(control.name)] = pulumi.Output.secret(keys.apply(callers))
        return secrets

    def _decide(self, raw: JsonMapping, scaling_raw: JsonValue = None) -> _Decision:
        """The plan of one placement: the whole fleet's (one stack), or what is fleet-wide and
        every shard's share (fleet stack, with a layout)."""
        args, layout = self.args, self.layout
        fleet = args.fleet
        try:
            placement = FleetPlacement.from_json(normalize_numbers(raw))
            scaling = _scaling(scaling_raw)
            if layout is None:
                # Replicas a scale-in removed keep running, out of the routes, until drained.
                plan = plan_fleet(fleet, placement, control_spec(args), self.egress, leaving=scaling.draining)
                shares: dict[str, str] = {}
            else:
                routes = fleet_routes_for(fleet, placement)
                # Fleet-wide only: the clusters are planned by their shard stacks.
                plan = FleetPlan(placement, {}, routes, self.control_plan)
                shares = shares_text(fleet, placement, layout, routes)
        except (RenderError, PlacementFormatError, StateFormatError) as exc:
            raise ResourceError(str(exc), self) from None
        if args.split is not None and args.split.shares_file and layout is not None:
            write_shares_file(args.split.shares_file, shares, layout, shares_digests(fleet, shares, layout))
        _report(plan, args)
        if scaling_raw is not None:
            pulumi.log.info(format_autoscaling(scaling))
        return _Decision(plan, shares)

    def _register_clusters(self, here: Sequence[str]) -> dict[str, TraefikGateway]:
        """Each cluster this stack applies: the cluster, its serving stack and namespaces, its
        workload gateway. The caches and deployments on them are the role's (`_cache`,
        `_deployment`), once these are registered."""
        args, control = self.args, self.control_plan
        fleet = args.fleet
        self._ready: dict[str, pulumi.Output[ClusterReady]] = {}
        gateways: dict[str, TraefikGateway] = {}
        for cname in here:
            spec = fleet.clusters[cname]
            foundation = plan_foundation(fleet, cname)
            cluster = self.clusters[cname] = InferenceCluster(cname, InferenceClusterArgs(
                cluster=spec, fleet=fleet, foundation=foundation, access=args.access.get(cname, ClusterAccess()),
                render_dir=args.render_dir,
                host_port=CONTROL_HOST_PORT if control.in_fleet and control.kind and control.cluster == cname else None,
                aws=args.aws, gcp=args.gcp, observed=args.observe is not None), self.top)
            self._ready[cname] = self._prepare(foundation, cluster)
            routes = self.plan.apply(functools.partial(_gateway_routes, cname, foundation.gateway_name))
            hop = ({hop_secret_name(foundation.gateway_name): self.certificates.hop_secret(foundation.gateway_name)}
                   if self.certificates is not None else {})
            gateways[cname] = TraefikGateway(foundation.gateway_name, TraefikGatewayArgs(
                type_token=WORKLOAD, cluster=cname, objects=foundation.gateway, routes=routes, secrets=hop),
                pulumi.ResourceOptions(parent=cluster, providers=[cluster.provider],
                                       depends_on=self._ready[cname].apply(lambda r: r.base)))
        self._providers = {c: cluster.provider for c, cluster in self.clusters.items()}
        return gateways

    def _cache(self, key: tuple[str, str]) -> None:
        """The ModelCache `key` on the clusters registered here (after `_register_clusters`)."""
        args = self.args
        ModelCache(resource_name("cache", *key), ModelCacheArgs(
            cache=args.fleet.caches[key], plan=self.plan, providers=self._providers, ready=self._ready,
            hf_token=args.hf_token, write_secrets=not args.render_dir), self.top)

    def _deployment(self, key: tuple[str, str], candidates: Sequence[str]) -> None:
        """The ModelDeployment `key`, its replicas on the clusters registered here."""
        self.deployments["/".join(key)] = ModelDeployment(resource_name(*key), ModelDeploymentArgs(
            deployment=self.args.fleet.deployments[key], plan=self.plan, candidates=candidates,
            providers=self._providers, ready=self._ready), self.top)

    def _report_secrets(self, here: Sequence[str], *, hosts_control: bool) -> None:
        """GitOps: at plan time, the Secrets this stack's objects reference (docs/pulumi-program.md)."""
        control = self.control_plan if hosts_control else None
        self.plan.apply(functools.partial(_report_secrets, self.args, here, control))

    def _register_control(self, urls: pulumi.Output[dict[str, str]]) -> None:
        """The control-plane gateway (routing to the workload gateways at `urls`), the
        hand-written endpoints and the services."""
        args, control = self.args, self.control_plan
        fleet = args.fleet
        self.control: InferenceCluster = (self.clusters[control.cluster] if control.in_fleet else control_cluster(
            args.control_plane, render_dir=args.render_dir, host_port=CONTROL_HOST_PORT if control.kind else None,
            opts=self.top))
        api_keys = pulumi.Output.from_input(args.endpoint_api_keys or {})
        for key, ep in sorted(fleet.endpoints.items()):
            secret = ep.spec.api_key_secret
            key_out = api_keys.apply(functools.partial(_api_key, f"{key[0]}/{secret.name}")) if secret else None
            ModelEndpoint(resource_name("endpoint", *key), ModelEndpointArgs(
                endpoint=ep, api_key=None if args.render_dir else key_out, expects_key=not args.render_dir), self.top)
        cp_gateway = TraefikGateway(control.name, TraefikGatewayArgs(
            type_token=CONTROL_PLANE, cluster=control.cluster, objects=control.gateway,
            routes=pulumi.Output.all(self.plan, urls).apply(
                lambda a: routes_configmap(control.name, control.routes_config(a[0].routes, a[1]))["data"]),
            egress_secret=self._egress_secret(api_keys) if control.egress_mode == "secret" else None,
            secrets=self._control_secrets(),
            secret_labels={callers_secret_name(control.name): control.edge.callers_labels},
            props={"egress": sorted(egress_ports(control.static_routes)), "tls": control.edge.tls,
                   "auth": control.edge.auth}),
            pulumi.ResourceOptions(parent=self.control, providers=[self.control.provider],
                                   depends_on=[self.control.namespace]))
        base = _control_address(args, control, cp_gateway)
        for key, svc in sorted(fleet.services.items()):
            self.services["/".join(key)] = ModelService(resource_name("service", *key), ModelServiceArgs(
                service=svc, plan=self.plan, base_url=base), self.top)
        self.outputs["services"] = {k: {"url": s.url, "weights": s.weights} for k, s in self.services.items()}
        self.outputs["gatewayUrl"] = base

    def _prepare(self, foundation: ClusterFoundation, cluster: InferenceCluster) -> pulumi.Output[ClusterReady]:
        """Serving stack, namespaces and per-namespace support objects; returns what the
        cluster's workloads wait for."""
        name = foundation.name
        spec = self.args.fleet.clusters[name]
        render_dir = self.args.render_dir
        # components: Provided means the platform team already runs the serving stack there.
        charts = foundation.charts
        if cluster.physical_name is not None:
            charts = bind_eks_cluster_name(charts, cluster.physical_name)
        stack = ServingStack(f"{name}-serving", ServingStackArgs(
            cluster=name, stack=spec.spec.stack, charts=charts, kai_queue=foundation.kai_queue,
            install_charts=self.args.install_charts and not foundation.provided,
            stack_objects=foundation.stack_objects() if render_dir else (),
            chart_depends_on=cluster.chart_dependencies),
            pulumi.ResourceOptions(parent=cluster, providers=[cluster.provider], depends_on=[cluster.namespace]))
        if render_dir and (files := foundation.stack_files()):
            # What `modelplane render` writes besides the manifests: the charts to install, the IAM
            # the cluster-autoscaler needs; a resource, so preview writes nothing and destroy removes them.
            ServingStackFiles(f"{name}-serving-files", os.path.join(render_dir, name), files,
                              pulumi.ResourceOptions(parent=cluster))
        base = ClusterReady((cluster.namespace, stack, *stack.ready))

        def register(fp: FleetPlan) -> ClusterReady:
            return _register_cluster_objects(fp.clusters[name], cluster, base)

        return self.plan.apply(register)

    def _gateway_urls(self, gateways: Mapping[str, TraefikGateway], names: Sequence[str]
                      ) -> pulumi.Output[dict[str, str]]:
        """How the control plane reaches the workload gateways of `names` (registered here, or
        known without them: render and sim stacks, static addresses)."""
        args = self.args
        if args.render_dir or args.sim:
            # Also the sim's: its LoadBalancer Services never get an address (components/sim.py).
            known = gitops_gateway_urls(args.fleet)[0]
            return pulumi.Output.from_input({name: known[name] for name in names})
        urls: dict[str, pulumi.Input[str]] = {}
        for name in names:
            static = static_gateway_url(args.fleet.clusters[name])
            urls[name] = static if static is not None else gateways[name].address.apply(lambda a: f"http://{a}")
        return pulumi.Output.all(**urls) if urls else pulumi.Output.from_input({})

    def _egress_secret(self, api_keys: pulumi.Output[Mapping[str, str]]) -> pulumi.Output[JsonObject]:
        control = self.control_plan

        def egress(keys: Mapping[str, str] | None) -> JsonObject:
            def lookup(namespace: str, credential: Credential) -> str:
                key = f"{namespace}/{credential.secret_name}"
                if key not in (keys or {}):
                    raise ResourceError(f"no API key for {key}: `pulumi config set --secret --path "
                                        f"'endpointApiKeys[\"{key}\"]' <key>`", self)
                return (keys or {})[key]
            return egress_config(control.static_routes, lookup, roots=EGRESS_ROOTS)
        return pulumi.Output.secret(api_keys.apply(egress))


def _scaling(raw: JsonValue) -> ScalingState:
    """The placement resource's `autoscaling` output (None in a preview before the first check, or
    without autoscalers)."""
    return ScalingState.from_json(normalize_numbers(raw)) if raw else ScalingState()


def _gateway_routes(cluster: str, gateway: str, fp: FleetPlan) -> dict[str, str]:
    return dict(routes_configmap(gateway, fp.clusters[cluster].gateway_config)["data"])


def _api_key(key: str, keys: Mapping[str, str] | None) -> str | None:
    return (keys or {}).get(key)


def control_spec(args: FleetArgs) -> ControlPlane:
    return ControlPlane(args.control_plane.name, args.control_plane.source)


def _register_cluster_objects(plan: ClusterPlan, cluster: InferenceCluster, base: ClusterReady) -> ClusterReady:
    """Namespaces, ModelExpress and the mock engine's ConfigMaps, parented to the cluster
    (resource names as before the plan existed, so stacks keep them); returns what the
    cluster's workloads wait for, per namespace."""
    name = plan.name

    def child(deps: Sequence[pulumi.Resource]) -> pulumi.ResourceOptions:
        return pulumi.ResourceOptions(parent=cluster, provider=cluster.provider, depends_on=list(deps))

    namespaces: dict[str, list[pulumi.Resource]] = {}
    for obj in plan.namespaces:
        ns = obj["metadata"]["name"]
        namespaces[ns] = [RenderedObject(resource_name(name, "ns", ns), obj, child(base.base))]
    for obj in plan.modelexpress:
        ns = obj["metadata"]["namespace"]
        RenderedObject(object_name(name, obj), obj, child([*base.base, *namespaces.get(ns, [])]))
    for obj in plan.mock_engine:
        ns = obj["metadata"]["namespace"]
        mock = RenderedObject(resource_name(name, "mock-engine", ns), obj, child([*base.base, *namespaces.get(ns, [])]))
        namespaces.setdefault(ns, []).append(mock)
    return ClusterReady(base.base, {ns: tuple(deps) for ns, deps in namespaces.items()})


def _report(fp: FleetPlan, args: FleetArgs) -> None:
    """The placement table and shortfalls in `pulumi preview`."""
    pulumi.log.info("placement:\n" + format_table(fp.placement, args.accounting))
    for message in shortfalls(fp.placement):
        pulumi.log.warn(message)


def _report_secrets(args: FleetArgs, here: Sequence[str], control: ControlPlan | None, fp: FleetPlan) -> None:
    """What GitOps users must add: the Secrets this stack's objects reference, and the
    gateways the control plane cannot name."""
    if not args.render_dir:
        return
    if control is not None:
        for warning in gitops_gateway_urls(args.fleet)[1]:
            pulumi.log.warn(warning)
    needs: set[SecretNeed] = {s for c in here for s in fp.clusters[c].secrets}
    needs |= set(control.secrets) if control is not None else set()
    if needs:
        secrets = sorted(needs, key=lambda s: (s.namespace, s.name, s.key))
        pulumi.log.warn(f"renderDir: {len(secrets)} Secret(s) are referenced but never written under "
                        f"{args.render_dir}; create them in the clusters (docs/pulumi-program.md): "
                        + "; ".join(s.describe() for s in secrets))


def _control_address(args: FleetArgs, control: ControlPlan, gateway: TraefikGateway) -> pulumi.Input[str]:
    scheme = "https" if control.edge.tls else "http"
    if args.render_dir or args.sim:
        # GitOps: nothing is deployed by this program; the sim: no Service gets an address.
        return in_cluster_url(control.name, tls=control.edge.tls)
    if control.kind:
        return f"{scheme}://localhost:{CONTROL_HOST_PORT}"
    return gateway.address.apply(lambda a: f"{scheme}://{a}" if a else "")
