"""Fleet + placement -> what each cluster runs (`plan_cluster`, `plan_fleet`).

Pure and Pulumi-free: the inputs are the fleet (its documents) and the placement, so a
per-cluster stack can build its share from a StackReference to the fleet's placement.
Every rule about which objects land where lives here and in the renderers it calls:

* namespaces: of every deployment that may run on the cluster (the scheduler's candidate
  clusters), of every cache staged there, and of every replica placed there. Static on
  purpose, so a namespace does not come and go with its replicas;
* caches: staged where their selector matches and the cluster has cache storage, and
  wherever a replica placed there mounts them;
* the mock engine's ConfigMap (Kind) and the ModelExpress server (Dynamo): in each of
  those namespaces, built-in ones included;
* routes: every placed replica is an endpoint (semantics §4.1); each workload gateway
  serves its own, the control plane all of them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from modelplane.api import Fleet, InferenceCluster, ModelCache
from modelplane.autoscale.state import Draining, with_leaving
from modelplane.clouds.aws import gateway_service_annotations
from modelplane.gateway.config import ServiceRoute
from modelplane.gateway.fleet import fleet_routes, leaving_routes, placement_endpoints
from modelplane.render import RenderError, render_cache, render_replica
from modelplane.render.cache import cache_matches, hugging_face
from modelplane.render.gateway import (
    CONTROL_GATEWAY,
    CONTROL_NODE_PORT,
    NODE_PORT,
    EgressMode,
    egress_configmap,
    egress_keys,
    gateway_objects,
    plugin_configmap,
    static_gateway_url,
    workload_gateway_name,
)
from modelplane.render.gitops import autoscaler_iam, serving_stack_provided
from modelplane.render.mock_engine_configmap import render_mock_engine_configmap, ships_mock_engine
from modelplane.render.names import cache_secret_name
from modelplane.render.namespace import BUILTIN_NAMESPACES, render_namespace, render_system_namespace
from modelplane.render.pool_labels import render_pool_labeler
from modelplane.render.service import serving_url
from modelplane.render.serving import chart_specs, dynamo, render_kai_queue, render_modelexpress
from modelplane.routing import WeightedBackend
from modelplane.scheduler import FleetPlacement, PlacedReplica, candidate_clusters
from modelplane.storage import cache_storage_class

from .cluster_plan import (
    CachePlan,
    ClusterFacts,
    ClusterFoundation,
    ClusterPlan,
    ControlPlan,
    FleetPlan,
    ReplicaPlan,
    SecretNeed,
)
from .gateway import control_hop, hop_need, hop_volume, plan_edge

DEFAULT_CONTROL_PLANE = "control"
HF_TOKEN_CONFIG = "hfToken"


@dataclass(frozen=True)
class ControlPlane:
    """Where the control-plane gateway runs when no InferenceGateway names a fleet cluster
    (the stack's `controlPlane`; `modelplane render --control-plane`)."""

    name: str = DEFAULT_CONTROL_PLANE
    source: str = "Existing"      # Kind | Existing


class PlanError(RenderError):
    """The fleet cannot be planned as declared; the message names the manifest and the fix."""


def plan_foundation(fleet: Fleet, cluster: str) -> ClusterFoundation:
    """What a workload cluster runs whatever the placement."""
    spec = _cluster(fleet, cluster)
    gateway = workload_gateway_name(cluster)
    control = fleet.control_gateway()
    # Internal when the control plane runs on this very cluster (same VPC); from another cluster
    # (another VPC, region or cloud) the control plane reaches it over the internet, the hop
    # authenticated both ways by mutual TLS (docs/data-path.md).
    colocated = control is not None and control.spec.cluster_name == cluster
    kvroute = fleet.cache_aware()
    return ClusterFoundation(
        name=cluster,
        system_namespace=render_system_namespace(cluster),
        pool_labeler=tuple(render_pool_labeler(spec, fleet)),
        kai_queue=render_kai_queue() if dynamo(spec) else None,
        charts=tuple(chart_specs(spec, fleet)),
        gateway=(*gateway_objects(gateway, node_port=NODE_PORT if spec.source == "Kind" else None,
                                  secrets=[hop_volume(gateway)], tls=True, kvroute=kvroute,
                                  service_annotations=_load_balancer(fleet, spec.source, internal=colocated)),
                 # kvroute's sources, when a ModelService of the fleet is balanced CacheAware.
                 *([plugin_configmap(gateway, callerauth=False, kvroute=True)] if kvroute else [])),
        hop=hop_need(gateway, f"the hop certificate of cluster {cluster}'s gateway (mutual TLS)"),
        provided=serving_stack_provided(spec),
        autoscaler_iam=autoscaler_iam(spec),
    )


def _load_balancer(fleet: Fleet, source: str, *, internal: bool) -> Callable[[Sequence[int]], dict[str, str]] | None:
    """The gateway Service's load balancer annotations on `source` (EKS: an NLB), or None."""
    if source != "EKS":
        return None
    return functools.partial(gateway_service_annotations, fleet, internal=internal)


def cache_clusters(fleet: Fleet, cache: ModelCache, placement: FleetPlacement | None = None) -> list[str]:
    """Clusters a cache is staged on: its selector matches and the cluster can stage it;
    with a placement, also every cluster where a placed replica mounts it (a replica kept
    where the selector no longer matches still needs its PVC)."""
    staged = {name for name, c in fleet.clusters.items()
              if cache_matches(cache, c) and cache_storage_class(c) is not None}
    key = (cache.metadata.namespace or "default", cache.metadata.name)
    for dp in placement.deployments if placement is not None else []:
        dep = fleet.deployments.get((dp.namespace, dp.name))
        ref = dep.spec.template.spec.model_cache_ref if dep is not None else None
        if ref is not None and (dp.namespace, ref.name) == key:
            staged |= {r.cluster for r in dp.replicas}
    return sorted(staged)


def _cluster(fleet: Fleet, name: str) -> InferenceCluster:
    found = fleet.clusters.get(name)
    if found is None:
        raise PlanError(f"InferenceCluster {name!r} is not in the fleet")
    return found


def _check_placement(fleet: Fleet, placement: FleetPlacement) -> None:
    for dp in placement.deployments:
        if (dp.namespace, dp.name) not in fleet.deployments:
            raise PlanError(f"placement lists ModelDeployment {dp.namespace}/{dp.name}, which is not in the fleet")
        for r in dp.replicas:
            if r.cluster not in fleet.clusters:
                raise PlanError(f"replica {r.name} of {dp.namespace}/{dp.name} is placed on unknown "
                                f"InferenceCluster {r.cluster!r}")


def _token(cache: ModelCache) -> SecretNeed | None:
    auth = hugging_face(cache).auth_secret
    if auth is None:
        return None
    ns = cache.metadata.namespace or "default"
    return SecretNeed(ns, cache_secret_name(ns, cache.metadata.name), auth.key, HF_TOKEN_CONFIG,
                      f"the Hugging Face token of ModelCache {ns}/{cache.metadata.name}")


def fleet_routes_for(fleet: Fleet, placement: FleetPlacement) -> tuple[ServiceRoute, ...]:
    """Every ModelService with its weighted backends; each replica reached at its serving Service."""
    endpoints = placement_endpoints(fleet, placement, lambda ns, replica, _cluster: serving_url(ns, replica))
    return tuple(fleet_routes(fleet, endpoints))


def leaving_routes_for(fleet: Fleet, applied: FleetPlacement, leaving: Sequence[Draining]
                       ) -> tuple[tuple[ServiceRoute, ...], tuple[ServiceRoute, ...]]:
    """(the control plane's routes, the workload gateways') while the `leaving` replicas of
    `applied` drain (modelplane.gateway.fleet.leaving_routes)."""
    endpoints = placement_endpoints(fleet, applied, lambda ns, replica, _cluster: serving_url(ns, replica))
    serving, local = leaving_routes(fleet, endpoints, {d.key for d in leaving})
    return tuple(serving), tuple(local)


Placed = tuple[str, str, PlacedReplica]   # (namespace, deployment, replica) on one cluster


def placed_by_cluster(placement: FleetPlacement) -> dict[str, list[Placed]]:
    """Every placed replica, grouped by cluster: deployments in placement order, replicas
    by (index, name), the order a cluster's plan lists them in. One pass, not one per cluster."""
    out: dict[str, list[Placed]] = {}
    for dp in placement.deployments:
        for r in sorted(dp.replicas, key=lambda r: (r.index, r.name)):
            out.setdefault(r.cluster, []).append((dp.namespace, dp.name, r))
    return out


def cluster_facts(fleet: Fleet, placement: FleetPlacement,
                  routes: tuple[ServiceRoute, ...] | None = None) -> dict[str, ClusterFacts]:
    """For every workload cluster, what its plan reads about the rest of the fleet for this
    placement (`routes`: the fleet's, when already computed). Each rule is inverted once
    (deployment -> clusters becomes cluster -> namespaces), so this is linear in the fleet."""
    _check_placement(fleet, placement)
    routes = fleet_routes_for(fleet, placement) if routes is None else routes
    namespaces: dict[str, set[str]] = {name: set() for name in fleet.clusters}
    for (ns, _), names in candidate_clusters(fleet).items():
        for name in names:
            namespaces[name].add(ns)
    caches: dict[str, list[tuple[str, str]]] = {name: [] for name in fleet.clusters}
    for key, cache in sorted(fleet.caches.items()):
        for name in cache_clusters(fleet, cache, placement):
            caches[name].append(key)
    local: dict[str, list[ServiceRoute]] = {name: [] for name in fleet.clusters}
    for r in routes:
        by_cluster: dict[str, list[WeightedBackend]] = {}
        for b in r.backends:
            if b.endpoint.cluster in local:
                by_cluster.setdefault(b.endpoint.cluster, []).append(b)
        for name, backends in by_cluster.items():
            local[name].append(ServiceRoute(r.namespace, r.name, tuple(backends), r.cache_aware))
    return {name: ClusterFacts(tuple(sorted(namespaces[name])), tuple(caches[name]), tuple(local[name]))
            for name in sorted(fleet.clusters)}


def plan_cluster(fleet: Fleet, placement: FleetPlacement, cluster: str) -> ClusterPlan:
    """Everything `cluster` runs for this placement."""
    _cluster(fleet, cluster)
    facts = cluster_facts(fleet, placement)
    return plan_with_facts(fleet, cluster, placed_by_cluster(placement).get(cluster, []), facts[cluster])


def plan_with_facts(fleet: Fleet, cluster: str, placed: Sequence[Placed], facts: ClusterFacts) -> ClusterPlan:
    """One cluster's plan from its replicas and its facts: the one function behind
    `plan_fleet` and a shard stack's plan (modelplane.plan.share), so both agree."""
    spec = _cluster(fleet, cluster)
    replicas = []
    namespaces = set(facts.namespaces)
    for ns, name, r in placed:
        deployment = fleet.deployments[(ns, name)]
        try:
            objects = render_replica(fleet, deployment, r, spec)
        except RenderError as exc:
            raise PlanError(f"{fleet.source_of(deployment)}: {exc}") from exc
        replicas.append(ReplicaPlan(ns, name, r, tuple(objects)))
        namespaces.add(ns)
    caches = []
    for ns, name in facts.caches:
        cache = fleet.caches[(ns, name)]
        try:
            objects = render_cache(fleet, cache, spec)
        except RenderError as exc:
            raise PlanError(f"{fleet.source_of(cache)}: {exc}") from exc
        caches.append(CachePlan(ns, name, tuple(objects), _token(cache)))
        namespaces.add(ns)
    used = sorted(namespaces)
    return ClusterPlan(
        name=cluster,
        foundation=plan_foundation(fleet, cluster),
        namespaces=tuple(render_namespace(ns, cluster) for ns in used if ns not in BUILTIN_NAMESPACES),
        modelexpress=tuple(o for ns in used for o in render_modelexpress(ns)) if dynamo(spec) else (),
        # Kind regions run the examples' mock engine from a stock image; its source
        # travels as a ConfigMap the engine pods mount (modelplane/render/mock_engine_configmap.py).
        mock_engine=tuple(render_mock_engine_configmap(ns, cluster) for ns in used) if ships_mock_engine(spec) else (),
        caches=tuple(caches),
        replicas=tuple(replicas),
        routes=facts.routes,
    )


def control_plane_cluster(fleet: Fleet, default: ControlPlane) -> tuple[str, bool, bool]:
    """(cluster, is a fleet cluster, is Kind) the control-plane gateway runs on."""
    gw = fleet.control_gateway()
    if gw is not None and gw.spec.cluster_name:
        name = gw.spec.cluster_name
        if name not in fleet.clusters:
            raise PlanError(f"{fleet.source_of(gw)}: InferenceGateway {gw.metadata.name} names cluster "
                            f"{name!r}, which is not in the fleet")
        return name, True, fleet.clusters[name].source == "Kind"
    return default.name, False, default.source == "Kind"


def plan_control(fleet: Fleet, control: ControlPlane = ControlPlane(), egress: EgressMode = "reference"
                 ) -> ControlPlan:
    """The control-plane gateway, whatever the placement. `egress`: how API keys reach it
    (`secret`: a Secret the program fills; `reference`: Secrets the user creates)."""
    cluster, in_fleet, kind = control_plane_cluster(fleet, control)
    static = fleet_routes_for(fleet, FleetPlacement([]))
    mode: EgressMode | None = egress if any(b.endpoint.external for r in static for b in r.backends) else None
    edge = plan_edge(fleet)
    source = fleet.clusters[cluster].source if in_fleet else control.source
    kvroute = fleet.cache_aware()
    gateway = gateway_objects(CONTROL_GATEWAY, node_port=CONTROL_NODE_PORT if kind else None,
                              static_routes=static, egress=mode, secrets=[hop_volume(CONTROL_GATEWAY), *edge.volumes],
                              tls=edge.tls, plugins=edge.auth, redirect=edge.redirect, kvroute=kvroute,
                              service_annotations=_load_balancer(fleet, source, internal=False))
    if mode == "reference":
        gateway.append(egress_configmap(CONTROL_GATEWAY, static))
    if edge.auth or kvroute:
        gateway.append(plugin_configmap(CONTROL_GATEWAY, callerauth=edge.auth, kvroute=kvroute))
    return ControlPlan(cluster=cluster, in_fleet=in_fleet, kind=kind, static_routes=static,
                       system_namespace=render_system_namespace(cluster), gateway=tuple(gateway),
                       egress_mode=mode, egress=tuple(egress_keys(static)), edge=edge, hop=control_hop(fleet),
                       hop_secret=hop_need(CONTROL_GATEWAY, "the control-plane gateway's client certificate for "
                                                            "the workload gateways (mutual TLS)"))


def plan_fleet(fleet: Fleet, placement: FleetPlacement, control: ControlPlane = ControlPlane(),
               egress: EgressMode = "reference", *, leaving: Sequence[Draining] = ()) -> FleetPlan:
    """Every workload cluster's plan and the control plane's, for one placement. `leaving`:
    replicas a scale-in took out of the placement that still drain (modelplane.autoscale):
    their objects stay on their clusters; the control plane routes nothing to them, and their
    workload gateway only where it has no other replica of the service."""
    if leaving:
        applied = with_leaving(placement, leaving)
        routes, local = leaving_routes_for(fleet, applied, leaving)
    else:
        applied, routes = placement, fleet_routes_for(fleet, placement)
        local = routes
    facts = cluster_facts(fleet, applied, local)
    placed = placed_by_cluster(applied)
    clusters = {name: plan_with_facts(fleet, name, placed.get(name, []), facts[name]) for name in facts}
    return FleetPlan(placement=placement, clusters=clusters, routes=routes,
                     control=plan_control(fleet, control, egress))


def gitops_gateway_urls(fleet: Fleet) -> tuple[dict[str, str], list[str]]:
    """Gateway URLs when nothing is deployed by us (GitOps): the known ones, and for the
    others a placeholder and a warning saying how to name the gateway."""
    urls: dict[str, str] = {}
    warnings = []
    for name, cluster in sorted(fleet.clusters.items()):
        url = static_gateway_url(cluster)
        if url is None:
            warnings.append(f"InferenceCluster {name}: no spec.gateway.hostname, so the rendered control-plane "
                            "routes cannot name its gateway; set one for the GitOps path")
            url = f"https://{name}.gateway.invalid"
        urls[name] = url
    return urls, warnings
