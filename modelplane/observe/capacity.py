"""Observed capacity: what each pool of each cluster really has free, in the units of the
scheduler's ledger (free devices per node, per device kind of the pool's class).

Pure: `fleet_capacity(fleet, readings, previous)` turns what `modelplane.observe.read` listed
into a `FleetCapacity`; `.observed()` is the scheduler's `observed` input. Rules
(docs/observe.md):

* a node belongs to the pool its `modelplane.ai/pool` label names (or, with `poolLabel: Apply`,
  whose selector it matches);
* usable (Ready, schedulable, no taint our pods do not tolerate): its published DRA devices per
  driver, minus those allocated to any claim the plan does not charge itself; the devices of
  the previous placement's replicas on this cluster count as free, because the ledger charges
  those replicas again (a claim of another tenant, or of a replica the plan does not know,
  stays held);
* cordoned or with an untolerated NoSchedule taint: only the devices the previous placement's
  replicas hold there (they keep running; nothing new lands);
* NotReady or with an untolerated NoExecute taint, or gone: nothing;
* DRA device kinds of one driver share its devices in class order (the last kind takes what
  is left); Synthetic kinds are not published, so they count as declared;
* a node counts at most the devices its class declares per node for each driver (a
  ResourceSlice publishing 100,000 GPUs on a node of an 8-GPU class counts 8, with a note),
  and a device several claims name is held once;
* a pool without any node falls back to its declared size on sources whose pools the program
  creates (Kind, EKS, GKE: it may not exist yet) and is empty elsewhere (nobody labelled it);
* an unreachable cluster, or one not observed, keeps its declared sizes, and says why.
Everything is sorted, so the same objects always give the same value (and the same state).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from modelplane.api import Fleet
from modelplane.api.inference_class import InferenceClass
from modelplane.api.inference_cluster import InferenceCluster
from modelplane.json_types import JsonMapping, JsonObject
from modelplane.redact import outside_text
from modelplane.scheduler import FleetPlacement, ObservedPool
from modelplane.vocabulary import LABEL_POOL, PROVISIONED_SOURCES

from .objects import (
    DOWN,
    DRAINING,
    DeviceId,
    ReplicaKey,
    SliceDevice,
    claim_devices,
    claim_owner_pod,
    meta,
    name_of,
    node_state,
    pod_replica,
    pool_of,
    published_devices,
)
from .read import ClusterRead, NotRead, Reading, Unreachable

OBSERVED = "observed"
DECLARED = "declared"


@dataclass(frozen=True)
class PoolCapacity:
    """One pool: its usable nodes' free vectors (sorted), or the declared fallback."""

    source: str                                   # observed | declared
    free: tuple[tuple[int, ...], ...] = ()
    devices: int = 0                              # DRA devices published on the nodes counted
    held: int = 0                                 # of those, held by claims the plan does not charge
    reason: str = ""                              # why declared
    strays: int = 0                               # of `held`, by pods of ours outside the previous placement

    def to_json(self) -> JsonObject:
        if self.source == DECLARED:
            return {"source": DECLARED, "reason": self.reason}
        groups = sorted(Counter(self.free).items(), key=lambda kv: (-sum(kv[0]), kv[0]))
        out: JsonObject = {"source": OBSERVED, "nodes": len(self.free), "devices": self.devices,
                               "held": self.held,
                               "free": [{"devices": list(vec), "nodes": n} for vec, n in groups]}
        if self.strays:
            out["heldByStrays"] = self.strays
        return out

    @classmethod
    def from_json(cls, data: JsonMapping) -> PoolCapacity:
        if data.get("source") == DECLARED:
            return cls(DECLARED, reason=str(data.get("reason", "")))
        free: list[tuple[int, ...]] = []
        for group in data.get("free") or []:
            free.extend([tuple(int(n) for n in group["devices"])] * int(group["nodes"]))
        return cls(OBSERVED, tuple(sorted(free)), int(data.get("devices", 0)), int(data.get("held", 0)),
                   strays=int(data.get("heldByStrays", 0)))


@dataclass(frozen=True)
class ClusterCapacity:
    source: str                                   # observed | declared
    reason: str = ""                              # why declared
    pools: Mapping[str, PoolCapacity] = field(default_factory=dict)
    notes: tuple[str, ...] = ()                   # nodes left out or limited, and why

    def to_json(self) -> JsonObject:
        if self.source == DECLARED:
            return {"source": DECLARED, "reason": self.reason}
        out: JsonObject = {"source": OBSERVED, "pools": {p: c.to_json() for p, c in sorted(self.pools.items())}}
        if self.notes:
            out["notes"] = list(self.notes)
        return out

    @classmethod
    def from_json(cls, data: JsonMapping) -> ClusterCapacity:
        if data.get("source") == DECLARED:
            return cls(DECLARED, str(data.get("reason", "")))
        pools = {str(p): PoolCapacity.from_json(c) for p, c in (data.get("pools") or {}).items()}
        return cls(OBSERVED, "", pools, tuple(str(n) for n in data.get("notes") or []))


@dataclass(frozen=True)
class FleetCapacity:
    clusters: Mapping[str, ClusterCapacity] = field(default_factory=dict)

    def observed(self) -> dict[str, dict[str, ObservedPool]]:
        """The scheduler's `observed`: every pool read from its cluster (declared ones absent)."""
        out: dict[str, dict[str, ObservedPool]] = {}
        for name, cluster in self.clusters.items():
            pools = {p: ObservedPool(c.free) for p, c in cluster.pools.items() if c.source == OBSERVED}
            if pools:
                out[name] = pools
        return out

    def node_counts(self) -> dict[str, dict[str, int]]:
        """Nodes counted per observed pool (what the declared-capacity check compares with)."""
        out: dict[str, dict[str, int]] = {}
        for name, cluster in self.clusters.items():
            counts = {p: len(c.free) for p, c in cluster.pools.items() if c.source == OBSERVED}
            if counts:
                out[name] = counts
        return out

    def to_json(self) -> JsonObject:
        return {name: c.to_json() for name, c in sorted(self.clusters.items())}

    @classmethod
    def from_json(cls, data: JsonMapping) -> FleetCapacity:
        return cls({str(k): ClusterCapacity.from_json(v) for k, v in data.items()})


def charged_replicas(previous: FleetPlacement | None) -> set[ReplicaKey]:
    """The replicas whose devices the ledger charges itself: every replica of the previous placement."""
    if previous is None:
        return set()
    return {ReplicaKey(d.namespace, d.name, r.cluster, r.index) for d in previous.deployments for r in d.replicas}


def _class(fleet: Fleet, pool_class: str | None) -> InferenceClass | None:
    return fleet.classes.get(pool_class) if pool_class else None


def _vector(cls: InferenceClass, available: Mapping[str, int]) -> tuple[int, ...]:
    """Free devices per device kind of the class from free devices per driver."""
    left = dict(available)
    kinds = cls.spec.devices
    last = {d.driver: i for i, d in enumerate(kinds) if d.claim == "DRA"}
    out = []
    for i, kind in enumerate(kinds):
        if kind.claim != "DRA":
            out.append(kind.count)              # Synthetic: not published, as declared
            continue
        have = left.get(kind.driver, 0)
        take = have if last[kind.driver] == i else min(have, kind.count)
        left[kind.driver] = have - take
        out.append(take)
    return tuple(out)


def _per_node(counts: Iterable[tuple[str, str]]) -> dict[str, Counter[str]]:
    out: dict[str, Counter[str]] = {}
    for node, driver in counts:
        out.setdefault(node, Counter())[driver] += 1
    return out


def class_limits(cls: InferenceClass) -> dict[str, int]:
    """Devices per node the class says a node of its pool holds, per DRA driver."""
    out: Counter[str] = Counter()
    for kind in cls.spec.devices:
        if kind.claim == "DRA":
            out[kind.driver] += kind.count
    return dict(out)


def _held(claims: Iterable[JsonObject], pods: Mapping[tuple[str, str], ReplicaKey | None], name: str,
          charged: set[ReplicaKey], devices: Mapping[DeviceId, SliceDevice]
          ) -> tuple[set[DeviceId], set[DeviceId], set[DeviceId]]:
    """(devices held by replicas the plan charges itself, by anyone else, by strays of ours),
    each device once however many claims name it; one held by both counts as held by others."""
    ours: set[DeviceId] = set()
    others: set[DeviceId] = set()
    strays: set[DeviceId] = set()
    for claim in claims:
        owner = claim_owner_pod(claim)
        key = pods.get(owner) if owner else None
        charged_here = key is not None and key.cluster == name and key in charged
        for device in claim_devices(claim):
            if device not in devices:
                continue
            (ours if charged_here else others).add(device)
            if key is not None and not charged_here:
                strays.add(device)
    return ours - others, others, strays


def _count(held: Iterable[DeviceId], devices: Mapping[DeviceId, SliceDevice]) -> dict[str, Counter[str]]:
    return _per_node((devices[d].node, devices[d].driver) for d in held)


def _capped(have: Counter[str], limits: Mapping[str, int]) -> Counter[str]:
    return Counter({d: min(n, limits[d]) if d in limits else n for d, n in have.items()})


def cluster_capacity(fleet: Fleet, name: str, reading: ClusterRead, charged: set[ReplicaKey]) -> ClusterCapacity:
    cluster: InferenceCluster = fleet.clusters[name]
    devices = published_devices(reading.slices)
    pods = {(str(meta(p).get("namespace") or ""), name_of(p)): pod_replica(p) for p in reading.pods}
    ours, others, strays = _held(reading.claims, pods, name, charged, devices)
    published = _per_node((d.node, d.driver) for d in devices.values())
    held_ours, held_others, held_strays = _count(ours, devices), _count(others, devices), _count(strays, devices)

    members: dict[str, list[JsonObject]] = {}
    for node in sorted(reading.nodes, key=name_of):
        pool = pool_of(cluster, node)
        if pool is not None:
            members.setdefault(pool, []).append(node)
    pools: dict[str, PoolCapacity] = {}
    notes: list[str] = []
    for spec in cluster.spec.node_pools:
        cls = _class(fleet, spec.class_name)
        if cls is None or not cls.spec.devices:
            continue                        # not published to the scheduler
        nodes = members.get(spec.name, [])
        if not nodes:
            if cluster.spec.cluster.source in PROVISIONED_SOURCES:
                pools[spec.name] = PoolCapacity(DECLARED, reason=f"no node labelled {LABEL_POOL}={spec.name} yet "
                                                                  "(the pool may not exist yet)")
            else:
                pools[spec.name] = PoolCapacity(OBSERVED)
                notes.append(f"pool {spec.name}: no node labelled {LABEL_POOL}={spec.name}")
            continue
        limits = class_limits(cls)
        free: list[tuple[int, ...]] = []
        total = held = stray = 0
        for node in nodes:
            node_name = name_of(node)
            shown = outside_text(node_name, limit=80)
            state, why = node_state(node)
            mine = _capped(held_ours.get(node_name, Counter()), limits)
            if state == DOWN:
                notes.append(f"node {shown} (pool {spec.name}): {why}: its devices leave the ledger")
                continue
            if state == DRAINING:
                if sum(mine.values()):
                    free.append(_vector(cls, mine))
                    notes.append(f"node {shown} (pool {spec.name}): {why}: only the replicas already "
                                 "there count")
                else:
                    notes.append(f"node {shown} (pool {spec.name}): {why}: nothing new lands there")
                continue
            raw = published.get(node_name, Counter())
            have = _capped(raw, limits)
            for driver in sorted(d for d in raw if raw[d] > have[d]):
                notes.append(f"node {shown} (pool {spec.name}): publishes {raw[driver]} {outside_text(driver, 80)} "
                             f"device(s), more than class {cls.metadata.name} holds per node ({have[driver]}); "
                             f"only {have[driver]} count")
            taken = held_others.get(node_name, Counter())
            taken = Counter({d: min(n, have[d]) for d, n in taken.items() if d in have})
            total += sum(have.values())
            held += sum(taken.values())
            stray += min(sum(held_strays.get(node_name, Counter()).values()), sum(taken.values()))
            free.append(_vector(cls, {d: have[d] - taken[d] for d in have}))
        pools[spec.name] = PoolCapacity(OBSERVED, tuple(sorted(free)), total, held, strays=stray)
    return ClusterCapacity(OBSERVED, "", pools, tuple(notes))


def fleet_capacity(fleet: Fleet, readings: Mapping[str, Reading], previous: FleetPlacement | None = None
                   ) -> FleetCapacity:
    """Every cluster of the fleet: observed where it was read, declared (with why) elsewhere."""
    charged = charged_replicas(previous)
    clusters: dict[str, ClusterCapacity] = {}
    for name in sorted(fleet.clusters):
        reading = readings.get(name)
        if reading is None:
            clusters[name] = ClusterCapacity(DECLARED, "not observed (no kubeconfig)")
        elif isinstance(reading, Unreachable):
            clusters[name] = ClusterCapacity(DECLARED, f"unreachable: {reading.reason}")
        elif isinstance(reading, NotRead):
            clusters[name] = ClusterCapacity(DECLARED, f"not observed ({reading.reason})")
        else:
            clusters[name] = cluster_capacity(fleet, name, reading, charged)
    return FleetCapacity(clusters)
