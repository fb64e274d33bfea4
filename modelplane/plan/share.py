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
from dataclasses import asdict, dataclass

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


def _route_json(route: ServiceRoute) -> JsonObject:
    return {"namespace": route.namespace, "name": route.name, "backends": [asdict(b) for b in route.backends]}


def _route(data: JsonMapping) -> ServiceRoute:
    return ServiceRoute(data["namespace"], data["name"], tuple(_backend(b) for b in data["backends"]))


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
