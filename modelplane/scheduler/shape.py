"""Compile the loaded fleet into the small, immutable shapes the scheduler works on.

Everything the algorithm needs is read from the pydantic models exactly once here, so
the phases never touch the API models and per-replica work stays cheap.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from typing import TYPE_CHECKING

from modelplane.api import Fleet, ModelDeployment, NodePool
from modelplane.clouds.zones import nodes_per_zone, pool_zones
from modelplane.json_types import JsonMapping
from modelplane.storage import cache_storage_problem

from .ledger import ObservedCapacity, ObservedPool

if TYPE_CHECKING:  # annotations only: modelplane.cel is imported when first needed
    from modelplane.cel import DeviceView

# matchLabels as sorted (key, value) pairs: hashable, so selector-keyed caches can use it.
Labels = tuple[tuple[str, str], ...]
# What pool matching depends on: (pool name, class name, fabric domain) per pool.
Signature = tuple[tuple[str, str, str | None], ...]


def _nonneg(value: int | None) -> int:
    return value if value is not None and value > 0 else 0


# ---------------------------------------------------------------- deployments

@dataclass(frozen=True, eq=False)
class RequestShape:
    name: str
    count: int
    cels: tuple[str, ...]


@dataclass(frozen=True, eq=False)
class MemberShape:
    index: int
    role: str
    pods: int          # pods of one gang: worker.nodes for a Worker, else 1
    copies: int        # engine copies; every copy needs its own pods
    requests: tuple[RequestShape, ...]
    # What matching a pool's class depends on (the requests, by content): members of
    # different deployments asking for the same devices share one answer.
    match_key: tuple[object, ...] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "match_key", tuple((r.name, r.count, r.cels) for r in self.requests))

    @property
    def pod_count(self) -> int:
        return self.pods * self.copies


@dataclass(frozen=True, eq=False)
class EngineShape:
    name: str
    copies: int
    members: tuple[MemberShape, ...]
    # The engine by content: where it can be placed and what it costs depend on nothing
    # else, so engines of deployments of one shape share their placement options.
    key: tuple[object, ...] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", (self.name, self.copies,
                                         tuple((m.index, m.role, m.pods, m.copies, m.match_key) for m in self.members)))


@dataclass(frozen=True)
class Toleration:
    key: str
    operator: str      # "Equal" | "Exists"
    value: str
    effect: str        # "" = every effect


@dataclass(eq=False)
class DeploymentShape:
    namespace: str
    name: str
    desired: int
    engines: tuple[EngineShape, ...]
    selector: Labels        # deployment clusterSelector.matchLabels
    cache_name: str | None
    cache_selector: Labels  # referenced ModelCache's matchLabels
    tolerations: tuple[Toleration, ...]
    invalid: str | None = None                   # CEL compile error, if any

    @property
    def key(self) -> tuple[str, str]:
        return (self.namespace, self.name)

    @cached_property
    def engines_key(self) -> tuple[object, ...]:
        """Its engines by content (EngineShape.key): what placing one replica depends on."""
        return tuple(e.key for e in self.engines)

    def engine(self, name: str) -> EngineShape | None:
        return next((e for e in self.engines if e.name == name), None)


def labels_of(mapping: Mapping[str, str | None] | None) -> Labels:
    """matchLabels (or any label mapping) as sorted (key, value) pairs."""
    if not mapping:
        return ()
    return tuple(sorted((str(k), "" if v is None else str(v)) for k, v in dict(mapping).items()))


def compile_deployment(fleet: Fleet, key: tuple[str, str], dep: ModelDeployment) -> DeploymentShape:
    """The deployment as the scheduler sees it (the loader validated every field read here)."""
    namespace, name = key
    spec = dep.spec.template.spec
    engines = []
    invalid = None
    for engine in spec.engines:
        copies = engine.copies or 1
        members = []
        for mi, member in enumerate(engine.members):
            role = member.role or "Standalone"
            pods = member.worker.nodes if role == "Worker" and member.worker is not None else 1
            requests = []
            for dev in member.node_selector.devices if member.node_selector is not None else []:
                cels = tuple(s.cel for s in dev.selectors if s.cel)
                requests.append(RequestShape(dev.name, dev.count or 1, cels))
                if invalid is None:
                    err = _compile_error(cels)
                    if err is not None:
                        invalid = (f"Invalid nodeSelector CEL expression in engine "
                                   f"{engine.name!r}, member {mi} ({role}), request "
                                   f"{requests[-1].name!r}: {err}")
            members.append(MemberShape(mi, role, max(1, int(pods)), int(copies), tuple(requests)))
        engines.append(EngineShape(engine.name, int(copies), tuple(members)))

    cache_name = spec.model_cache_ref.name if spec.model_cache_ref is not None else None
    cache_selector: Labels = ()
    if cache_name:
        cache = fleet.caches.get((namespace, cache_name))
        if cache is not None and cache.spec.cluster_selector is not None:
            cache_selector = labels_of(cache.spec.cluster_selector.match_labels)
    tolerations = tuple(Toleration(key=t.key or "", operator=t.operator or "Equal", value=t.value or "",
                                   effect=t.effect or "") for t in spec.tolerations)
    return DeploymentShape(
        namespace=namespace,
        name=name,
        desired=_nonneg(dep.spec.replicas),
        engines=tuple(engines),
        selector=labels_of(spec.cluster_selector.match_labels if spec.cluster_selector is not None else None),
        cache_name=cache_name,
        cache_selector=cache_selector,
        tolerations=tolerations,
        invalid=invalid,
    )


@lru_cache(maxsize=4096)
def _compile_error(cels: tuple[str, ...]) -> str | None:
    """Why one of the selectors does not compile, or None; once per distinct set."""
    # Deferred: importing modelplane.cel (cel-python, lark and its grammar) costs ~0.16 s, which
    # loading manifests and planning without a selector to compile need not pay.
    from modelplane import cel

    for expr in cels:
        try:
            cel.compile_selector(expr)
        except cel.CelError as exc:
            return f"{expr!r}: {exc}"
    return None


# ------------------------------------------------------------------- clusters

@dataclass(frozen=True, eq=False)
class DeviceKind:
    name: str
    dra: bool                 # claim DRA (resolved into ResourceClaims) vs Synthetic
    device_class_name: str | None
    count: int                # devices of this kind per node
    driver: str
    attributes_raw: JsonMapping     # as DeviceView.from_spec reads them (AttributeValue.raw())
    capacity_raw: JsonMapping


@dataclass(eq=False)
class ClassView:
    name: str
    devices: tuple[DeviceKind, ...]
    # The EC2 instance type its nodes are (provisioning.eks.instanceType): what decides which of
    # its GPUs share a PCIe root with its EFAs (modelplane.clouds.pcie). None: not named.
    instance_type: str | None = None
    _views: dict[int, DeviceView] = field(default_factory=dict)

    def device_view(self, i: int) -> DeviceView:
        view = self._views.get(i)
        if view is None:
            # Deferred: modelplane.cel costs ~0.16 s to import (see _compile_error).
            from modelplane.cel import DeviceView

            d = self.devices[i]
            view = DeviceView.from_spec(d.driver, dict(d.attributes_raw), dict(d.capacity_raw))
            self._views[i] = view
        return view


@dataclass(frozen=True, eq=False)
class PoolView:
    name: str
    cls: ClassView
    nodes: int                # capacity: observed node count if given, else declared
    domain: str | None        # fabric.domain; pools sharing one may host one engine
    # free devices per usable node, when read from the cluster (ObservedPool)
    free: tuple[tuple[int, ...], ...] | None = None
    # the zones its nodes live in (EKS, GKE; empty where unknown) and the nodes each of them is
    # sure to hold, None when no zone is capped below the pool (modelplane.clouds.zones)
    zones: tuple[str, ...] = ()
    zone_nodes: int | None = None

    @property
    def zoned(self) -> bool:
        """Its nodes span two or more zones: a gang copy must keep to one of them."""
        return len(self.zones) > 1


@dataclass(frozen=True)
class Taint:
    key: str
    value: str
    effect: str

    def __str__(self) -> str:
        return f"{self.key}={self.value}:{self.effect}" if self.value else f"{self.key}:{self.effect}"


@dataclass(frozen=True)
class Outage:
    """Why a cluster takes no new replicas (decided outside, with a clock: modelplane.observe);
    `evacuate`: re-place the ones it has; `reachable`: its API server answers (a replica there
    can be deleted). See scheduler.failover."""

    reason: str
    evacuate: bool = False
    reachable: bool = False


@dataclass(frozen=True, eq=False)
class ClusterView:
    name: str
    labels: Mapping[str, str]
    taints: tuple[Taint, ...]
    pools: tuple[PoolView, ...]          # published order = spec.nodePools order

    # What pool matching depends on (names, classes, fabric domains; not sizes):
    # clusters built from one template share it, and so share matching work.
    signature: Signature = ()
    # Why no ModelCache can be staged here (modelplane.storage); None when caches can.
    cache_problem: str | None = None
    # Why it takes no new replica now (unreachable, unready, a failover in flight:
    # scheduler.failover); None when it does.
    outage: str | None = None
    # The signature as a small number (equal signatures, equal ids): cheap to key memos by.
    sig_id: int = 0
    # The signature with the pools' sizes and zones, as a small number: clusters of one template
    # in one ledger state answer alike (scheduler.census).
    template_id: int = 0

    def pool(self, name: str) -> PoolView | None:
        return next((p for p in self.pools if p.name == name), None)


def compile_classes(fleet: Fleet, only: str | None = None) -> dict[str, ClassView]:
    classes = {}
    for name in sorted(fleet.classes):
        if only is not None and name != only:
            continue
        devices = [DeviceKind(name=d.name, dra=d.claim == "DRA", device_class_name=d.device_class_name,
                              count=_nonneg(d.count), driver=d.driver,
                              attributes_raw={k: v.raw() for k, v in d.attributes.items()},
                              capacity_raw={k: v.value for k, v in d.capacity.items()})
                   for d in fleet.classes[name].spec.devices]
        prov = fleet.classes[name].spec.provisioning
        instance = prov.eks.instance_type if prov is not None and prov.eks is not None else None
        classes[name] = ClassView(name, tuple(devices), instance)
    return classes


def declared_nodes(pool: NodePool) -> int:
    if pool.max_node_count:
        return _nonneg(pool.max_node_count)
    return _nonneg(pool.node_count)


def _fit(free: tuple[tuple[int, ...], ...], kinds: int) -> tuple[tuple[int, ...], ...]:
    """Observed vectors padded or cut to the class's device kinds (an observation of an
    older class version must not break the ledger); negative counts are 0."""
    return tuple(tuple(max(0, int(n)) for n in (vec + (0,) * kinds)[:kinds]) for vec in free)


def compile_clusters(fleet: Fleet, observed: ObservedCapacity | None = None,
                     closed: Mapping[str, str] | None = None) -> dict[str, ClusterView]:
    """The clusters as the scheduler sees them; `closed`: cluster -> why it takes no new replica."""
    classes = compile_classes(fleet)
    observed = observed or {}
    closed = closed or {}
    clusters = {}
    signatures: dict[Signature, int] = {}
    templates: dict[tuple[object, ...], int] = {}
    for name in sorted(fleet.clusters):
        ic = fleet.clusters[name]
        seen = observed.get(name) or {}
        pools = []
        for p in ic.spec.node_pools:
            cls = classes.get(p.class_name) if p.class_name else None
            # A pool whose class is missing or empty is not published (semantics §1.2).
            if cls is None or not cls.devices:
                continue
            value = seen.get(p.name)
            free = None
            if isinstance(value, ObservedPool):
                nodes, free = value.nodes, _fit(value.free, len(cls.devices))
            else:
                nodes = _nonneg(value) if p.name in seen else declared_nodes(p)
            zones = tuple(pool_zones(ic, p))
            pools.append(PoolView(p.name, cls, nodes, p.fabric.domain or None, free, zones,
                                  nodes_per_zone(ic, p, nodes, zones) if len(zones) > 1 else None))
        taints = tuple(Taint(t.key, t.value or "", t.effect) for t in ic.spec.taints)
        labels = dict(ic.metadata.labels)
        signature = tuple((p.name, p.cls.name, p.domain) for p in pools)
        template = (signature, tuple((p.nodes, p.zones, p.zone_nodes) for p in pools))
        clusters[name] = ClusterView(name, labels, taints, tuple(pools), signature, cache_storage_problem(ic),
                                     closed.get(name), signatures.setdefault(signature, len(signatures)),
                                     templates.setdefault(template, len(templates)))
    return clusters
