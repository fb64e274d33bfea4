"""What a cluster runs, as data: the one answer the Pulumi components, `modelplane render`
and `demo` share (docs/design.md, "One cluster plan")."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from modelplane.gateway.config import ServiceRoute, control_plane_config, workload_config
from modelplane.gateway.security import EdgeSecurity, HopTls
from modelplane.json_types import JsonObject
from modelplane.render.gateway import (
    CONTROL_GATEWAY,
    EgressKey,
    EgressMode,
    SecretVolume,
    egress_urls,
    routes_configmap,
    workload_gateway_name,
    workload_hop,
)
from modelplane.render.gitops import serving_stack_files, serving_stack_objects
from modelplane.render.serving import ChartSpec
from modelplane.scheduler import FleetPlacement, PlacedReplica
from modelplane.vocabulary import SYSTEM_NAMESPACE, Manifest

# Dependencies first: a namespace before its contents, a PVC before the Job and the
# pods that mount it, claim templates before the pods that reference them.
KIND_ORDER = {
    "Namespace": 0,
    "ServiceAccount": 1,
    "ClusterRole": 1,
    "ClusterRoleBinding": 1,
    "Role": 1,
    "RoleBinding": 1,
    "Queue": 1,
    "ResourceQuota": 1,
    "ConfigMap": 1,
    "PersistentVolumeClaim": 1,
    "Job": 2,
    "ResourceClaimTemplate": 3,
    "Deployment": 4,
    "LeaderWorkerSet": 4,
    "PodCliqueSet": 4,
    "Service": 5,
}


def sort_key(obj: Manifest) -> tuple[int, str, str, str]:
    meta = obj["metadata"]
    return (KIND_ORDER.get(obj["kind"], 9), obj["kind"], meta.get("namespace", ""), meta["name"])


@dataclass(frozen=True)
class SecretNeed:
    """A Secret the plan's objects reference but never carry. The Pulumi program creates it
    from its encrypted config (`config`); a GitOps user creates it in the cluster."""

    namespace: str
    name: str
    key: str
    config: str       # the stack config that supplies it, e.g. hfToken or endpointApiKeys["ns/x"]
    purpose: str      # for people: whose secret this is

    def describe(self) -> str:
        return f"Secret {self.namespace}/{self.name} (key {self.key}): {self.purpose}"


@dataclass(frozen=True)
class EdgePlan:
    """The control-plane gateway's edge: what Traefik runs and what it mounts."""

    security: EdgeSecurity | None = None        # None: plain HTTP, no caller keys
    volumes: tuple[SecretVolume, ...] = ()
    needs: tuple[SecretNeed, ...] = ()
    self_signed: bool = False
    callers_labels: dict[str, str] = field(default_factory=dict)   # what the callers Secret carries

    @property
    def tls(self) -> bool:
        return self.security is not None and self.security.tls is not None

    @property
    def auth(self) -> bool:
        return self.security is not None and self.security.auth

    @property
    def redirect(self) -> bool:
        return self.tls and self.security is not None and self.security.plain_http == "Redirect"


@dataclass(frozen=True)
class CachePlan:
    """One ModelCache staged on one cluster: its PVC and staging Job."""

    namespace: str
    name: str
    objects: tuple[Manifest, ...]
    token: SecretNeed | None = None   # the Hugging Face token Secret its Job reads


@dataclass(frozen=True)
class ReplicaPlan:
    """One placed replica and every object it needs on its cluster."""

    namespace: str
    deployment: str
    replica: PlacedReplica
    objects: tuple[Manifest, ...]


@dataclass(frozen=True)
class ClusterFacts:
    """What one cluster's plan reads about the rest of the fleet, for one placement:
    computed once for every cluster (`cluster_facts`), and what a shard stack receives
    from the fleet stack (modelplane.plan.share) instead of the whole fleet's placement."""

    namespaces: tuple[str, ...]              # of every deployment that may run here (candidate clusters)
    caches: tuple[tuple[str, str], ...]      # (namespace, name) of every ModelCache staged here
    routes: tuple[ServiceRoute, ...]         # per ModelService, its backends on this cluster (with weights)


@dataclass(frozen=True)
class ClusterFoundation:
    """What a cluster runs whatever the placement: known before anything is placed, so the
    program registers it outside the placement's Output."""

    name: str
    system_namespace: Manifest          # modelplane-system
    pool_labeler: tuple[Manifest, ...]  # clusters the program does not provision
    kai_queue: Manifest | None          # Dynamo clusters
    charts: tuple[ChartSpec, ...]       # the serving stack (Helm, not manifests)
    gateway: tuple[Manifest, ...]       # the workload gateway's static ConfigMap, Deployment, Service
    hop: SecretNeed | None = None       # its hop certificate's Secret (mutual TLS with the control plane)
    provided: bool = False              # Existing, components: Provided: its platform team runs the stack
    autoscaler_iam: JsonObject | None = None   # EKS: what the cluster-autoscaler needs in IAM

    def stack_objects(self) -> list[Manifest]:
        """The serving stack's manifests as GitOps applies them (modelplane.render.gitops): its
        charts' namespaces and pre-chart objects; none when the platform team runs the stack."""
        return [] if self.provided else serving_stack_objects(self.charts)

    def stack_files(self) -> dict[str, str]:
        """Its chart references, values and cloud prerequisites, relative path -> text."""
        return {} if self.provided else serving_stack_files(self.charts, self.autoscaler_iam)

    @property
    def gateway_name(self) -> str:
        return workload_gateway_name(self.name)

    def objects(self) -> list[Manifest]:
        extra = [self.kai_queue] if self.kai_queue is not None else []
        return [self.system_namespace, *self.pool_labeler, *extra, *self.gateway]


@dataclass(frozen=True)
class ClusterPlan:
    """Everything one workload cluster runs for a placement."""

    name: str
    foundation: ClusterFoundation
    namespaces: tuple[Manifest, ...]       # workload namespaces to create (never a built-in one)
    modelexpress: tuple[Manifest, ...]     # Dynamo: the ModelExpress server per namespace
    mock_engine: tuple[Manifest, ...]      # Kind: the mock engine's source per namespace
    caches: tuple[CachePlan, ...]
    replicas: tuple[ReplicaPlan, ...]
    routes: tuple[ServiceRoute, ...]       # per service, the backends on this cluster only

    @property
    def gateway_config(self) -> JsonObject:
        """The workload gateway's dynamic configuration: its local replicas, their weights,
        served only over mutual TLS."""
        return workload_config(self.name, self.routes, hop=workload_hop())

    @property
    def secrets(self) -> tuple[SecretNeed, ...]:
        hop = (self.foundation.hop,) if self.foundation.hop is not None else ()
        return hop + tuple(c.token for c in self.caches if c.token is not None)

    def objects(self) -> list[Manifest]:
        """Every manifest of the cluster's workload side, in apply order (the control-plane
        gateway, when it runs here, is `ControlPlan.objects`)."""
        objs = [*self.foundation.objects(), *self.namespaces, *self.modelexpress, *self.mock_engine,
                routes_configmap(self.foundation.gateway_name, self.gateway_config)]
        for cache in self.caches:
            objs += cache.objects
        for replica in self.replicas:
            objs += replica.objects
        return sorted(objs, key=sort_key)


@dataclass(frozen=True)
class ControlPlan:
    """The control-plane gateway, which weighs every ModelService over the workload
    clusters' gateways and the hand-written endpoints. Placement-free: the routes it
    serves come with the FleetPlan."""

    cluster: str                          # where it runs
    in_fleet: bool                        # a fleet cluster, or the stack's own control cluster
    kind: bool                            # on Kind: a NodePort the host publishes
    static_routes: tuple[ServiceRoute, ...]   # hand-written endpoints only: the egress entrypoints
    system_namespace: Manifest            # modelplane-system, when not a fleet cluster
    gateway: tuple[Manifest, ...]         # static ConfigMap, Deployment, Service (+ egress ConfigMap)
    egress_mode: EgressMode | None        # None: no hand-written endpoint
    egress: tuple[EgressKey, ...]         # the API keys it sends, named, never held
    name: str = CONTROL_GATEWAY
    edge: EdgePlan = EdgePlan()           # HTTPS and caller keys towards callers (modelplane.plan.gateway)
    hop: HopTls | None = None             # mutual TLS towards the workload gateways
    hop_secret: SecretNeed | None = None  # its client certificate's Secret

    def routes_config(self, routes: Sequence[ServiceRoute], gateway_urls: Mapping[str, str]) -> JsonObject:
        """Its dynamic configuration, given how it reaches each workload cluster's gateway."""
        return control_plane_config(routes, gateway_urls, egress_urls(self.static_routes),
                                    edge=self.edge.security, hop=self.hop)

    @property
    def secrets(self) -> tuple[SecretNeed, ...]:
        egress = tuple(SecretNeed(SYSTEM_NAMESPACE, k.secret_name, k.secret_key, f'endpointApiKeys["{k.config_key}"]',
                                  f"the API key of credential {k.config_key}") for k in self.egress)
        hop = (self.hop_secret,) if self.hop_secret is not None else ()
        return hop + self.edge.needs + egress

    def objects(self, routes: Sequence[ServiceRoute], gateway_urls: Mapping[str, str]) -> list[Manifest]:
        objs = [] if self.in_fleet else [self.system_namespace]
        objs += [*self.gateway, routes_configmap(self.name, self.routes_config(routes, gateway_urls))]
        return sorted(objs, key=sort_key)


@dataclass(frozen=True)
class FleetPlan:
    """The whole fleet for one placement: each workload cluster and the control plane."""

    placement: FleetPlacement
    clusters: Mapping[str, ClusterPlan]
    routes: tuple[ServiceRoute, ...]
    control: ControlPlan

    def replicas_of(self, namespace: str, name: str) -> list[ReplicaPlan]:
        return [r for c in self.clusters.values() for r in c.replicas
                if (r.namespace, r.deployment) == (namespace, name)]

    def cache_clusters(self, namespace: str, name: str) -> list[str]:
        return [c.name for c in self.clusters.values()
                if any((k.namespace, k.name) == (namespace, name) for k in c.caches)]

    @property
    def secrets(self) -> tuple[SecretNeed, ...]:
        needs = {s for c in self.clusters.values() for s in c.secrets} | set(self.control.secrets)
        return tuple(sorted(needs, key=lambda s: (s.namespace, s.name, s.key)))

    def route(self, namespace: str, name: str) -> ServiceRoute | None:
        return next((r for r in self.routes if (r.namespace, r.name) == (namespace, name)), None)

    def files(self) -> dict[str, dict[str, str]]:
        """Cluster name -> the serving stack's other files (charts, values, IAM), path -> text."""
        return {name: files for name, plan in self.clusters.items() if (files := plan.foundation.stack_files())}

    def manifests(self, gateway_urls: Mapping[str, str]) -> dict[str, list[Manifest]]:
        """Cluster name -> every manifest applied there (GitOps: one directory each), the serving
        stack's namespaces and pre-chart objects included (ClusterFoundation.stack_objects)."""
        out = {name: sorted([*plan.objects(), *plan.foundation.stack_objects()], key=sort_key)
               for name, plan in self.clusters.items()}
        control = self.control.objects(self.routes, gateway_urls)
        out[self.control.cluster] = sorted([*out.get(self.control.cluster, []), *control], key=sort_key)
        return out
