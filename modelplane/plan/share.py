"""A fleet larger than one stack: the fleet stack places the fleet and hands every shard
stack its share; a shard stack plans its clusters from that share alone.

One stack holding every cluster's objects grows superlinearly on the engine, so a fleet
can be split (docs/pulumi-program.md, "Split stacks"): the fleet stack runs the placement
and what is fleet-wide; each shard stack (a few clusters, by default one) applies its
clusters. What a shard needs besides the manifests, which it reads itself, is computed
once by the fleet stack (`fleet_shares`) and travels as a stack output:

* the placement restricted to its clusters (the replicas it renders);
* per cluster, the `ClusterFacts` its plan reads about the rest of the fleet: which
  namespaces the deployments that may run there use, which caches are staged there,
  and the workload gateway's routes, whose weights depend on replicas on other clusters;
* in the share of the shard that hosts the control-plane gateway: every fleet route.

`plan_shard` turns a share into the very ClusterPlans `plan_fleet` computes
(`plan_with_facts` is the one function behind both), after checking the shard read the
same manifests the fleet stack placed (`fleet_digest`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field

from modelplane.api import Fleet
from modelplane.engine_json import digest, normalize_numbers
from modelplane.gateway.config import ServiceRoute
from modelplane.json_types import JsonMapping, JsonObject, JsonValue
from modelplane.routing import Credential, Endpoint, WeightedBackend
from modelplane.scheduler import DeploymentPlacement, FleetPlacement

from .build import PlanError, cluster_facts, fleet_routes_for, placed_by_cluster, plan_with_facts
from .cluster_plan import ClusterFacts, ClusterPlan

SHARE_VERSION = 1
SHARD_PREFIX = "shard-"
SHARD_DIGEST_VERSION = 1
# The kinds a shard's plan reads only for the deployments placed on it and the caches staged
# there (shard_digest); every other manifest may be read by any shard.
PER_SHARD_KINDS = ("ModelDeployment", "ModelCache")


def shard_layout(clusters: Sequence[str], size: int) -> dict[str, tuple[str, ...]]:
    """Which clusters each shard stack applies: sorted names in chunks of `size`. With size
    1 a shard is named after its cluster, else `shard-000`, `shard-001`... Changing the
    size moves clusters between stacks (their objects are deleted by one stack and
    created by another), so pick it once."""
    if size < 1:
        raise PlanError(f"shard size must be at least 1, got {size}")
    names = sorted(clusters)
    if size == 1:
        return {name: (name,) for name in names}
    return {f"{SHARD_PREFIX}{i // size:03d}": tuple(names[i:i + size]) for i in range(0, len(names), size)}


def shard_of(layout: Mapping[str, Sequence[str]], cluster: str) -> str | None:
    return next((shard for shard, names in layout.items() if cluster in names), None)


def fleet_digest(fleet: Fleet) -> str:
    """A digest of every manifest: a shard refuses a share placed from other manifests."""
    return digest(fleet.to_documents())


@dataclass(frozen=True)
class Share:
    """What one shard stack receives from the fleet stack."""

    shard: str
    clusters: tuple[str, ...]
    fleet_digest: str
    placement: FleetPlacement                   # replicas on these clusters only
    facts: Mapping[str, ClusterFacts]           # per cluster
    control_routes: tuple[ServiceRoute, ...] | None = None   # the shard hosting the control plane: every route

    def to_json(self) -> JsonObject:
        out: JsonObject = {
            "version": SHARE_VERSION, "shard": self.shard, "clusters": list(self.clusters),
            "fleetDigest": self.fleet_digest,
            "placement": {"deployments": [{"namespace": d.namespace, "name": d.name, "desired": d.desired,
                                           "replicas": [r.to_json() for r in d.replicas]}
                                          for d in self.placement.deployments]},
            "facts": {c: {"namespaces": list(f.namespaces), "caches": [list(k) for k in f.caches],
                          "routes": [_route_json(r) for r in f.routes]} for c, f in self.facts.items()},
        }
        if self.control_routes is not None:
            out["controlRoutes"] = [_route_json(r) for r in self.control_routes]
        return out

    @classmethod
    def from_json(cls, data: JsonValue) -> Share:
        """A share as a stack output returns it (numbers as floats); PlanError when it is
        not one this version wrote."""
        data = normalize_numbers(data)
        try:
            if data.get("version") != SHARE_VERSION:
                raise PlanError(f"share written by version {data.get('version')!r}, this program reads "
                                f"{SHARE_VERSION}: run the fleet stack with this program first")
            facts = {str(c): ClusterFacts(tuple(f["namespaces"]), tuple((k[0], k[1]) for k in f["caches"]),
                                          tuple(_route(r) for r in f["routes"])) for c, f in data["facts"].items()}
            control = data.get("controlRoutes")
            return cls(str(data["shard"]), tuple(data["clusters"]), str(data["fleetDigest"]),
                       FleetPlacement.from_json(data["placement"]), facts,
                       tuple(_route(r) for r in control) if control is not None else None)
        except (KeyError, TypeError, IndexError, AttributeError, ValueError) as exc:
            raise PlanError(f"the fleet stack's share is unreadable ({exc!r}): run the fleet stack first") from None


def fleet_shares(fleet: Fleet, placement: FleetPlacement, layout: Mapping[str, Sequence[str]],
                 control_shard: str | None = None, routes: tuple[ServiceRoute, ...] | None = None) -> dict[str, Share]:
    """Every shard's share of one placement; `control_shard` also gets every route."""
    routes = fleet_routes_for(fleet, placement) if routes is None else routes
    facts = cluster_facts(fleet, placement, routes)
    digest = fleet_digest(fleet)
    shares = {}
    for shard, clusters in layout.items():
        mine = set(clusters)
        deployments = []
        for d in placement.deployments:
            here = [r for r in d.replicas if r.cluster in mine]
            if here:
                deployments.append(DeploymentPlacement(d.namespace, d.name, d.desired, here))
        shares[shard] = Share(shard, tuple(clusters), digest, FleetPlacement(deployments),
                              {c: facts[c] for c in clusters}, routes if shard == control_shard else None)
    return shares


def plan_shard(fleet: Fleet, share: Share) -> dict[str, ClusterPlan]:
    """Each of the share's clusters planned exactly as `plan_fleet` plans it."""
    if share.fleet_digest != fleet_digest(fleet):
        raise PlanError(f"shard {share.shard}: the fleet stack placed other manifests than this stack reads "
                        "(their digests differ); run the fleet stack with these manifests first")
    missing = [c for c in share.clusters if c not in fleet.clusters]
    if missing:
        raise PlanError(f"shard {share.shard}: InferenceCluster(s) {', '.join(missing)} are not in the fleet")
    placed = placed_by_cluster(share.placement)
    return {c: plan_with_facts(fleet, c, placed.get(c, []), share.facts[c]) for c in share.clusters}


@dataclass
class FleetDigests:
    """Digests of one fleet's manifests, each computed once, for `shard_digest` over many
    shards (the fleet stack's preview computes every shard's)."""

    fleet: Fleet
    _every: str | None = None
    _shared: str | None = None
    _items: dict[tuple[str, tuple[str, str]], str] = field(default_factory=dict)

    def every(self) -> str:
        if self._every is None:
            self._every = fleet_digest(self.fleet)
        return self._every

    def shared(self) -> str:
        """Every manifest of a kind any shard may read (not in PER_SHARD_KINDS)."""
        if self._shared is None:
            self._shared = digest([o.to_manifest() for o in self.fleet.objects() if o.kind not in PER_SHARD_KINDS])
        return self._shared

    def item(self, kind: str, key: tuple[str, str]) -> str | None:
        """One ModelDeployment's or ModelCache's manifest; None when the fleet has none."""
        if (kind, key) not in self._items:
            table = self.fleet.deployments if kind == "ModelDeployment" else self.fleet.caches
            obj = table.get(key)
            self._items[(kind, key)] = digest(obj.to_manifest()) if obj is not None else ""
        return self._items[(kind, key)] or None


def shard_digest(digests: FleetDigests, share_json: JsonMapping, *, control: bool) -> str:
    """What one shard stack's plan is made from, as a digest: equal digests, equal plans.

    A shard plans its clusters from its share (`plan_shard`) and the manifests: the share
    (without its digest of every manifest), every manifest of a kind any shard may read
    (classes, clusters, gateways, services, endpoints, budgets, autoscalers), and only the
    ModelDeployments placed on its clusters and the ModelCaches staged there or used by
    those deployments. The shard hosting the control-plane gateway reads every manifest
    (its routes, the services). A change to one deployment thus changes the digests of
    the shards it is placed on, of those whose routes or namespaces it changes, and of the
    control shard, and no other (tests/unit/render/test_share.py checks "equal digests,
    equal plans" over mutated fleets)."""
    share = {k: v for k, v in share_json.items() if k != "fleetDigest"}
    if control:
        manifests: JsonValue = digests.every()
    else:
        deployments = sorted({(str(d["namespace"]), str(d["name"]))
                              for d in (share.get("placement") or {}).get("deployments") or []})
        caches = {(str(k[0]), str(k[1])) for f in (share.get("facts") or {}).values() for k in f.get("caches") or []}
        for key in deployments:
            dep = digests.fleet.deployments.get(key)
            cache = digests.fleet.cache_for(dep) if dep is not None else None
            if cache is not None:
                caches.add((cache.metadata.namespace or "default", cache.metadata.name))
        manifests = [digests.shared(),
                     [[list(k), digests.item("ModelDeployment", k)] for k in deployments],
                     [[list(k), digests.item("ModelCache", k)] for k in sorted(caches)]]
    return digest([SHARD_DIGEST_VERSION, share, manifests])


def _route_json(route: ServiceRoute) -> JsonObject:
    out: JsonObject = {"namespace": route.namespace, "name": route.name,
                       "backends": [asdict(b) for b in route.backends]}
    if route.cache_aware:   # said only when on: a share without it reads (and digests) as before
        out["cacheAware"] = True
    return out


def _route(data: JsonMapping) -> ServiceRoute:
    return ServiceRoute(data["namespace"], data["name"], tuple(_backend(b) for b in data["backends"]),
                        cache_aware=data.get("cacheAware") is True)


def _backend(data: JsonMapping) -> WeightedBackend:
    fields = dict(data)
    endpoint = dict(fields.pop("endpoint"))
    credential = endpoint.pop("credential", None)
    return WeightedBackend(endpoint=Endpoint(**{**endpoint, "labels": dict(endpoint.get("labels") or {}),
                                                "credential": Credential(**credential) if credential else None}),
                           **fields)


@dataclass(frozen=True)
class StackLayout:
    """Which shard stack applies which clusters, and which one runs the control-plane
    gateway: the shard of the fleet cluster that hosts it, or a shard of its own (no
    workload cluster) named after the control cluster when that is not a fleet cluster."""

    shards: Mapping[str, tuple[str, ...]]
    control: str

    def to_json(self) -> JsonObject:
        return {"shards": {s: list(c) for s, c in self.shards.items()}, "control": self.control}

    @classmethod
    def from_json(cls, data: JsonValue) -> StackLayout:
        """The fleet stack's `layout` output; PlanError when it is not one."""
        if not isinstance(data, Mapping) or not isinstance(data.get("shards"), Mapping) or "control" not in data:
            raise PlanError("not a fleet stack's layout (is split.role fleet?)")
        return cls({str(s): tuple(str(c) for c in names) for s, names in data["shards"].items()}, str(data["control"]))

    def order(self) -> tuple[list[str], list[str]]:
        """(the shards that run first, in parallel; then the control-plane gateway's)."""
        return [s for s in self.shards if s != self.control], [self.control]


def stack_layout(fleet: Fleet, control_cluster: str, size: int) -> StackLayout:
    shards = shard_layout(list(fleet.clusters), size)
    hosting = shard_of(shards, control_cluster)
    if hosting is not None:
        return StackLayout(shards, hosting)
    if control_cluster in shards:
        raise PlanError(f"the control cluster {control_cluster!r} is not a fleet cluster but a shard stack has "
                        "its name; rename the stack config controlPlane.name")
    return StackLayout({**shards, control_cluster: ()}, control_cluster)
