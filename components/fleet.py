"""ModelplaneFleet: the whole fleet, or one stack of a split fleet, as one component, so
`pulumi preview` shows one tree.

It places the fleet (the placement resource), turns the placement into typed objects
once and plans every cluster with the core (`modelplane.plan`); the other components only
register what that plan holds. Also the entry point for users who prefer code to stack
YAML (`deploy_fleet(FleetArgs(fleet=load_manifests(...)))`).

One stack (`args.split` None) holds everything. Split (docs/pulumi-program.md, "Split
stacks"): the fleet stack holds the placement and exports each shard's share; a shard
stack registers its clusters from its share, and the shard hosting the control-plane
gateway also registers the gateway, the services and the hand-written endpoints. The
same code registers each part in every mode.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pulumi

from components.args import FLEET_ROLE, ClusterAccess, FleetArgs
from components.autoscale import autoscale_input, autoscaling_output, format_autoscaling
from components.cache import ModelCache, ModelCacheArgs
from components.certificates import HOP_CA_OUTPUT, DataPathCertificates, DataPathCertificatesArgs, fleet_hop_ca
from components.cluster import InferenceCluster, InferenceClusterArgs, control_cluster
from components.deployment import ModelDeployment, ModelDeploymentArgs
from components.errors import ResourceError
from components.gateway import CONTROL_PLANE, WORKLOAD, TraefikGateway, TraefikGatewayArgs
from components.k8s import ClusterReady, RenderedObject, object_name, resource_name
from components.observe import observation, placement_observe, verification
from components.service import ModelEndpoint, ModelEndpointArgs, ModelService, ModelServiceArgs
from components.serving import ServingStack, ServingStackArgs
from components.sim import sim_options
from components.split import (
    GATEWAY_URLS_OUTPUT,
    LAYOUT_OUTPUT,
    SHARES_OUTPUT,
    other_gateway_urls,
    shard_plan,
    shard_stack,
    shares_text,
    write_shares_file,
)
from modelplane.autoscale.state import ScalingState, StateFormatError
from modelplane.engine_json import normalize_numbers
from modelplane.gateway.config import egress_config
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
from modelplane.plan.share import StackLayout, shard_of, stack_layout
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
from modelplane.routing import Credential
from modelplane.scheduler import FleetPlacement, PlacementFormatError, candidate_clusters
from modelplane.scheduler.report import deployment_outputs, format_table, shortfalls
from providers.placement import FleetPlacementArgs, FleetPlacementResource

TYPE = "modelplane:index:ModelplaneFleet"
CONTROL_HOST_PORT = 8080  # Kind: the control-plane gateway on http://localhost:8080
# The components below were stack children before this root existed; the alias keeps
# their URNs (and, through them, their children's), so existing stacks replace nothing.
WAS_TOP_LEVEL = [pulumi.Alias(parent=pulumi.ROOT_STACK_RESOURCE)]
LARGE_OUTPUTS = ("placement", SHARES_OUTPUT)


@dataclass(frozen=True)
class _Decision:
    """What the fleet stack derives from one placement: the plan of what is fleet-wide and
    every shard's share (JSON text)."""

    plan: FleetPlan
    shares: Mapping[str, str]


class ModelplaneFleet(pulumi.ComponentResource):
    """The root component. Attributes (annotated in __init__: Pulumi reads class-level
    annotations as the types of props and outputs): `placement` (the placement resource;
    None in a shard stack), `plan` (Output[FleetPlan]), `clusters`, `control`,
    `deployments` (in a shard stack filled once its share is known), `services`,
    `outputs`."""

    def __init__(self, name: str, args: FleetArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        fleet, split = args.fleet, args.split
        props: dict[str, Any] = {"clusters": sorted(fleet.clusters), "renderDir": args.render_dir or ""}
        if split is not None:
            props["split"] = {"role": split.role, "shardSize": split.shard_size, "shard": split.shard}
        super().__init__(TYPE, name, props, sim_options(args.sim, opts))
        top = pulumi.ResourceOptions(parent=self, aliases=WAS_TOP_LEVEL)
        # GitOps output never holds a secret: Secrets are referenced and the user creates them.
        egress: EgressMode = "reference" if args.render_dir else "secret"
        try:
            control = plan_control(fleet, control_spec(args), egress)
            layout = stack_layout(fleet, control.cluster, split.shard_size) if split is not None else None
        except RenderError as exc:
            raise ResourceError(str(exc), self) from None
        self.placement: FleetPlacementResource | None = None
        observe = placement_observe(args.observe, args.access)       # read the clusters (docs/observe.md)
        self.outputs: dict[str, Any] = {}
        if split is None or split.role == FLEET_ROLE:
            autoscale = autoscale_input(fleet, args.autoscale)
            self.placement = FleetPlacementResource(
                "fleet-placement", FleetPlacementArgs(
                    fleet_documents=fleet.to_documents(), accounting=args.accounting, observed=args.observed,
                    observe=observe, autoscale=autoscale), top)
            scaling = self.placement.autoscaling if autoscale is not None else pulumi.Output.from_input(None)
            decision = pulumi.Output.all(self.placement.placement, scaling).apply(
                lambda a: self._decide(args, control, egress, layout, a[0], a[1]))
            if autoscale is not None:
                self.outputs["autoscaling"] = scaling.apply(lambda raw: autoscaling_output(_scaling(raw)))
            self.plan: pulumi.Output[FleetPlan] = decision.apply(lambda d: d.plan)
            self.outputs["deployments"] = self.plan.apply(lambda fp: deployment_outputs(fp.placement))
            if split is not None:
                assert layout is not None
                self.outputs[SHARES_OUTPUT] = decision.apply(lambda d: dict(d.shares))
                self.outputs[LAYOUT_OUTPUT] = layout.to_json()
            else:
                self.outputs["placement"] = self.plan.apply(lambda fp: fp.placement.to_json())
        else:
            assert layout is not None
            if split.shard not in layout.shards:
                raise ResourceError(f"stack config split.shard: no shard {split.shard!r} in this fleet's layout "
                                    f"(shard size {split.shard_size}): {', '.join(layout.shards)}", self)
            self.plan = shard_plan(fleet, split, control, self)
        self.clusters: dict[str, InferenceCluster] = {}
        self.deployments: dict[str, ModelDeployment] = {}
        self.services: dict[str, ModelService] = {}
        here = self._here(args, layout)
        hosts_control = split is None or (split.role != FLEET_ROLE and layout is not None
                                          and split.shard == layout.control)
        # Mutual TLS between the hops: one CA per fleet (render mode: referenced, never made).
        self.certificates = None if args.render_dir else self._certificates(args, control, here, top,
                                                                                  hosts_control=hosts_control)
        gateways = self._register_clusters(args, control, here, top)
        if split is not None and split.role != FLEET_ROLE:
            # what the shard hosting the control-plane gateway reads (other_gateway_urls)
            self.outputs[GATEWAY_URLS_OUTPUT] = self._gateway_urls(args, gateways, here)
        if split is None or split.role != FLEET_ROLE:
            self.plan.apply(functools.partial(_report_secrets, args, here, control if hosts_control else None))
        if hosts_control:
            self._register_control(args, control, layout, gateways, top)
        if observe is not None and self.placement is not None:
            # What check() read, and after `up` whether the clusters run what was placed
            # (docs/observe.md). A split fleet verifies with `python -m modelplane verify`.
            self.outputs["observation"] = observation(self.placement.capacity, self.placement.health)
            if split is None:
                self.outputs["verification"] = verification(
                    fleet, self.placement.placement, observe, args.observe.verify_wait if args.observe else 0,
                    [d.created for d in self.deployments.values()])
        # The stack exports every output (__main__.py); the component's own state keeps the
        # small ones, not a second copy of the placement or the shares (issue 15 item 6).
        self.register_outputs({k: v for k, v in self.outputs.items() if k not in LARGE_OUTPUTS})

    def _certificates(self, args: FleetArgs, control: ControlPlan, here: Sequence[str], top: pulumi.ResourceOptions,
                      *, hosts_control: bool) -> DataPathCertificates:
        """The hop CA (the fleet stack's, in a shard stack) and the certificates of this stack's gateways."""
        fleet, split = args.fleet, args.split
        self_signed: list[str] = []
        if hosts_control and control.edge.self_signed:
            if not (control.kind or args.sim):
                raise ResourceError(f"InferenceGateway spec.tls.selfSigned is for the kind, sim and render stacks "
                                    f"(control plane {control.cluster} is not a Kind cluster): give it "
                                    "certificateRefs (kubernetes.io/tls Secrets in modelplane-system)", self)
            self_signed = edge_names(fleet)
            pulumi.log.warn("the control-plane gateway's edge certificate is self-signed (generated by the program): "
                            "clients must be given it to trust (`pulumi stack output` does not show it; read the "
                            f"Secret {SELF_SIGNED_SECRET} in modelplane-system)")
        shard = split is not None and split.role != FLEET_ROLE
        certs = DataPathCertificates("data-path-certificates", DataPathCertificatesArgs(
            gateways={workload_gateway_name(c): hop_names(fleet.clusters[c]) for c in here},
            control=control.name if hosts_control else None, self_signed=self_signed,
            ca=fleet_hop_ca(split.fleet_stack, self) if shard and split is not None else None), top)
        if split is not None and split.role == FLEET_ROLE:
            self.outputs[HOP_CA_OUTPUT] = pulumi.Output.secret(
                pulumi.Output.all(certs.ca_cert, certs.ca_key).apply(lambda a: {"cert": a[0], "key": a[1]}))
        return certs

    def _control_secrets(self, args: FleetArgs, control: ControlPlan) -> dict[str, pulumi.Input[Mapping[str, str]]]:
        """The Secrets the control-plane gateway mounts that the program makes (live stacks)."""
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
            keys = pulumi.Output.from_input(args.gateway_api_keys or {})
            secrets[callers_secret_name(control.name)] = pulumi.Output.secret(keys.apply(callers))
        return secrets

    @staticmethod
    def _here(args: FleetArgs, layout: StackLayout | None) -> list[str]:
        """The workload clusters this stack applies."""
        if args.split is None:
            return sorted(args.fleet.clusters)
        if args.split.role == FLEET_ROLE or layout is None:
            return []
        return list(layout.shards[args.split.shard])

    def _decide(self, args: FleetArgs, control: ControlPlan, egress: EgressMode, layout: StackLayout | None,
                raw: Mapping[str, Any], scaling_raw: Any = None) -> _Decision:
        fleet = args.fleet
        try:
            placement = FleetPlacement.from_json(normalize_numbers(raw))
            scaling = _scaling(scaling_raw)
            if layout is None:
                # Replicas a scale-in removed keep running, out of the routes, until drained.
                plan = plan_fleet(fleet, placement, control_spec(args), egress, leaving=scaling.draining)
                shares: dict[str, str] = {}
            else:
                routes = fleet_routes_for(fleet, placement)
                # Fleet-wide only: the clusters are planned by their shard stacks.
                plan = FleetPlan(placement, {}, routes, control)
                shares = shares_text(fleet, placement, layout, routes)
        except (RenderError, PlacementFormatError, StateFormatError) as exc:
            raise ResourceError(str(exc), self) from None
        if args.split is not None and args.split.shares_file and layout is not None:
            write_shares_file(args.split.shares_file, shares, layout)
        _report(plan, args)
        if scaling_raw is not None:
            pulumi.log.info(format_autoscaling(scaling))
        return _Decision(plan, shares)

    def _register_clusters(self, args: FleetArgs, control: ControlPlan, here: Sequence[str],
                           top: pulumi.ResourceOptions) -> dict[str, TraefikGateway]:
        """Each cluster this stack applies: the cluster, its serving stack and namespaces,
        its workload gateway; then the caches and the deployments' replicas on them."""
        fleet = args.fleet
        ready: dict[str, pulumi.Output[ClusterReady]] = {}
        gateways: dict[str, TraefikGateway] = {}
        for cname in here:
            spec = fleet.clusters[cname]
            foundation = plan_foundation(fleet, cname)
            cluster = self.clusters[cname] = InferenceCluster(cname, InferenceClusterArgs(
                cluster=spec, fleet=fleet, foundation=foundation, access=args.access.get(cname, ClusterAccess()),
                render_dir=args.render_dir,
                host_port=CONTROL_HOST_PORT if control.in_fleet and control.kind and control.cluster == cname else None,
                aws=args.aws, gcp=args.gcp, observed=args.observe is not None), top)
            ready[cname] = self._prepare(foundation, cluster, args)
            routes = self.plan.apply(functools.partial(_gateway_routes, cname, foundation.gateway_name))
            hop = ({hop_secret_name(foundation.gateway_name): self.certificates.hop_secret(foundation.gateway_name)}
                   if self.certificates is not None else {})
            gateways[cname] = TraefikGateway(foundation.gateway_name, TraefikGatewayArgs(
                type_token=WORKLOAD, cluster=cname, objects=foundation.gateway, routes=routes, secrets=hop),
                pulumi.ResourceOptions(parent=cluster, providers=[cluster.provider],
                                       depends_on=ready[cname].apply(lambda r: r.base)))
        if not here:
            return gateways
        providers = {c: cluster.provider for c, cluster in self.clusters.items()}

        def cache(key: tuple[str, str]) -> None:
            ModelCache(resource_name("cache", *key), ModelCacheArgs(
                cache=fleet.caches[key], plan=self.plan, providers=providers, ready=ready, hf_token=args.hf_token,
                write_secrets=not args.render_dir), top)

        def deployment(key: tuple[str, str], candidates: Sequence[str]) -> None:
            self.deployments["/".join(key)] = ModelDeployment(resource_name(*key), ModelDeploymentArgs(
                deployment=fleet.deployments[key], plan=self.plan, candidates=candidates, providers=providers,
                ready=ready), top)

        if args.split is None:
            for key in sorted(fleet.caches):
                cache(key)
            for key, candidates in candidate_clusters(fleet).items():
                deployment(key, candidates)
            return gateways

        def shard_components(fp: FleetPlan) -> None:
            # A shard stack registers the caches staged and the deployments placed on its
            # clusters: with one stack per few clusters, a component per fleet-wide cache
            # and deployment in every shard would outnumber the objects.
            for key in sorted({(c.namespace, c.name) for p in fp.clusters.values() for c in p.caches}):
                cache(key)
            candidates = candidate_clusters(fleet)
            for d in fp.placement.deployments:
                deployment((d.namespace, d.name), candidates[(d.namespace, d.name)])

        self.plan.apply(shard_components)
        return gateways

    def _register_control(self, args: FleetArgs, control: ControlPlan, layout: StackLayout | None,
                          gateways: Mapping[str, TraefikGateway], top: pulumi.ResourceOptions) -> None:
        """The control-plane gateway, the hand-written endpoints and the services."""
        fleet = args.fleet
        self.control: InferenceCluster = (self.clusters[control.cluster] if control.in_fleet else control_cluster(
            args.control_plane, render_dir=args.render_dir, host_port=CONTROL_HOST_PORT if control.kind else None,
            opts=top))
        api_keys = pulumi.Output.from_input(args.endpoint_api_keys or {})
        for key, ep in sorted(fleet.endpoints.items()):
            secret = ep.spec.api_key_secret
            key_out = api_keys.apply(functools.partial(_api_key, f"{key[0]}/{secret.name}")) if secret else None
            ModelEndpoint(resource_name("endpoint", *key), ModelEndpointArgs(
                endpoint=ep, api_key=None if args.render_dir else key_out, expects_key=not args.render_dir), top)
        urls = self._fleet_gateway_urls(args, layout, gateways)
        cp_gateway = TraefikGateway(control.name, TraefikGatewayArgs(
            type_token=CONTROL_PLANE, cluster=control.cluster, objects=control.gateway,
            routes=pulumi.Output.all(self.plan, urls).apply(
                lambda a: routes_configmap(control.name, control.routes_config(a[0].routes, a[1]))["data"]),
            egress_secret=self._egress_secret(control, api_keys) if control.egress_mode == "secret" else None,
            secrets=self._control_secrets(args, control),
            secret_labels={callers_secret_name(control.name): control.edge.callers_labels},
            props={"egress": sorted(egress_ports(control.static_routes)), "tls": control.edge.tls,
                   "auth": control.edge.auth}),
            pulumi.ResourceOptions(parent=self.control, providers=[self.control.provider],
                                   depends_on=[self.control.namespace]))
        base = _control_address(args, control, cp_gateway)
        for key, svc in sorted(fleet.services.items()):
            self.services["/".join(key)] = ModelService(resource_name("service", *key), ModelServiceArgs(
                service=svc, plan=self.plan, base_url=base), top)
        self.outputs["services"] = {k: {"url": s.url, "weights": s.weights} for k, s in self.services.items()}
        self.outputs["gatewayUrl"] = base

    def _prepare(self, foundation: ClusterFoundation, cluster: InferenceCluster, args: FleetArgs
                 ) -> pulumi.Output[ClusterReady]:
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
        base = ClusterReady((cluster.namespace, stack, *stack.ready))

        def register(fp: FleetPlan) -> ClusterReady:
            return _register_cluster_objects(fp.clusters[name], cluster, base)

        return self.plan.apply(register)

    def _gateway_urls(self, args: FleetArgs, gateways: Mapping[str, TraefikGateway], names: Sequence[str]
                      ) -> pulumi.Output[dict[str, str]]:
        """How the control plane reaches the workload gateways of `names` (this stack's)."""
        if args.render_dir or args.sim:
            # Also the sim's: its LoadBalancer Services never get an address (components/sim.py).
            known = gitops_gateway_urls(args.fleet)[0]
            return pulumi.Output.from_input({name: known[name] for name in names})
        urls: dict[str, pulumi.Input[str]] = {}
        for name in names:
            static = static_gateway_url(args.fleet.clusters[name])
            urls[name] = static if static is not None else gateways[name].address.apply(lambda a: f"http://{a}")
        return pulumi.Output.all(**urls) if urls else pulumi.Output.from_input({})

    def _fleet_gateway_urls(self, args: FleetArgs, layout: StackLayout | None,
                            gateways: Mapping[str, TraefikGateway]) -> pulumi.Output[dict[str, str]]:
        """Every workload gateway's URL, for the control-plane routes. Split: a cluster of
        another shard without a static address is read from that shard stack's outputs."""
        split = args.split
        if split is None or layout is None or args.render_dir:
            return self._gateway_urls(args, gateways, sorted(args.fleet.clusters))
        own = self._gateway_urls(args, gateways, sorted(gateways))
        static = {n: u for n, c in args.fleet.clusters.items() if n not in gateways
                  and (u := static_gateway_url(c)) is not None}
        shards = sorted({s for n in args.fleet.clusters if n not in gateways and n not in static
                         and (s := shard_of(layout.shards, n)) is not None})
        others = [other_gateway_urls(split, shard, self) for shard in shards]

        def merge(parts: list[Mapping[str, str]]) -> dict[str, str]:
            urls = _merge(static, *parts)
            missing = sorted(set(args.fleet.clusters) - set(urls))
            if missing:
                stacks = ", ".join(sorted({shard_stack(split.fleet_stack, shard_of(layout.shards, n) or n)
                                           for n in missing}))
                raise ResourceError(f"no gateway address yet for cluster(s) {', '.join(missing)}: their shard "
                                    f"stack(s) {stacks} must run before this one (`python -m modelplane up` "
                                    "orders them), or give the clusters spec.gateway.hostname", self)
            return urls

        return pulumi.Output.all(own, *others).apply(merge)

    def _egress_secret(self, control: ControlPlan, api_keys: pulumi.Output[Mapping[str, str]]
                       ) -> pulumi.Output[dict[str, Any]]:
        def egress(keys: Mapping[str, str] | None) -> dict[str, Any]:
            def lookup(namespace: str, credential: Credential) -> str:
                key = f"{namespace}/{credential.secret_name}"
                if key not in (keys or {}):
                    raise ResourceError(f"no API key for {key}: `pulumi config set --secret --path "
                                        f"'endpointApiKeys[\"{key}\"]' <key>`", self)
                return (keys or {})[key]
            return egress_config(control.static_routes, lookup, roots=EGRESS_ROOTS)
        return pulumi.Output.secret(api_keys.apply(egress))


def _scaling(raw: Any) -> ScalingState:
    """The placement resource's `autoscaling` output (None in a preview before the first check, or
    without autoscalers)."""
    return ScalingState.from_json(normalize_numbers(raw)) if raw else ScalingState()


def _merge(*parts: Mapping[str, str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in parts:
        out.update(part)
    return out


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


def deploy_fleet(args: FleetArgs, name: str = "modelplane") -> ModelplaneFleet:
    return ModelplaneFleet(name, args)
