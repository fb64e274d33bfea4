"""What a read Node, Pod and ResourceClaim mean to the fleet: which pool a node belongs to,
whether new pods can land on it, which replica of ours a pod belongs to, which devices a
claim holds. Pure functions over the API's JSON; shared by capacity, verification and health.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from modelplane.api.inference_cluster import InferenceCluster
from modelplane.clouds.nvidia import GPU_TOLERATION
from modelplane.json_types import JsonMapping, JsonObject
from modelplane.scheduler.shape import Taint, Toleration
from modelplane.scheduler.taints import untolerated
from modelplane.vocabulary import (
    LABEL_CLUSTER,
    LABEL_DEPLOYMENT,
    LABEL_ENGINE,
    LABEL_MANAGED_BY,
    LABEL_POOL,
    LABEL_REPLICA_INDEX,
    MANAGED_BY,
)

# What our pods tolerate on a node: only the GPU taint (modelplane.render.pod); a deployment's
# tolerations are fleet-level (cluster taints), not rendered into pods.
POD_TOLERATIONS = (Toleration(GPU_TOLERATION["key"], GPU_TOLERATION["operator"], "", GPU_TOLERATION["effect"]),)

USABLE = "usable"       # new pods may land here
DRAINING = "draining"   # cordoned or an untolerated NoSchedule taint: what runs stays, nothing new
DOWN = "down"           # NotReady or an untolerated NoExecute taint: nothing runs


@dataclass(frozen=True, order=True)
class ReplicaKey:
    """A replica of ours as its objects' labels name it."""

    namespace: str
    deployment: str
    cluster: str
    index: int

    def __str__(self) -> str:
        return f"{self.namespace}/{self.deployment} {self.cluster}#{self.index}"


def meta(obj: JsonMapping) -> JsonMapping:
    value = obj.get("metadata")
    return value if isinstance(value, dict) else {}


def labels(obj: JsonMapping) -> Mapping[str, str]:
    value = meta(obj).get("labels")
    return value if isinstance(value, dict) else {}


def name_of(obj: JsonMapping) -> str:
    return str(meta(obj).get("name") or "")


def pool_of(cluster: InferenceCluster, node: JsonMapping) -> str | None:
    """The node pool a node belongs to: its `modelplane.ai/pool` label, or, for a pool whose
    nodes the program labels (`poolLabel: {mode: Apply}`), the pool whose selector it matches."""
    node_labels = labels(node)
    declared = {p.name for p in cluster.spec.node_pools}
    if node_labels.get(LABEL_POOL) in declared:
        return node_labels[LABEL_POOL]
    for pool in cluster.spec.node_pools:
        rule = pool.pool_label
        selector = rule.node_selector.match_labels if rule and rule.mode == "Apply" and rule.node_selector else None
        if selector and all(node_labels.get(k) == v for k, v in selector.items()):
            return pool.name
    return None


def _taints(node: JsonMapping) -> tuple[Taint, ...]:
    spec = node.get("spec") if isinstance(node.get("spec"), dict) else {}
    return tuple(Taint(str(t.get("key") or ""), str(t.get("value") or ""), str(t.get("effect") or ""))
                 for t in (spec or {}).get("taints") or [] if isinstance(t, dict))


def node_state(node: JsonMapping) -> tuple[str, str]:
    """(USABLE | DRAINING | DOWN, why) for one Node."""
    status = node.get("status") if isinstance(node.get("status"), dict) else {}
    ready = next((c for c in (status or {}).get("conditions") or []
                  if isinstance(c, dict) and c.get("type") == "Ready"), None)
    if ready is None or ready.get("status") != "True":
        return DOWN, "NotReady" if ready is not None else "no Ready condition"
    taints = _taints(node)
    evicting = untolerated(taints, POD_TOLERATIONS, ("NoExecute",))
    if evicting is not None:
        return DOWN, f"untolerated taint {evicting}"
    spec = node.get("spec") if isinstance(node.get("spec"), dict) else {}
    if (spec or {}).get("unschedulable"):
        return DRAINING, "cordoned"
    repelling = untolerated(taints, POD_TOLERATIONS, ("NoSchedule",))
    if repelling is not None:
        return DRAINING, f"untolerated taint {repelling}"
    return USABLE, ""


def pod_replica(pod: JsonMapping) -> ReplicaKey | None:
    """The replica a pod of ours belongs to, from the labels every replica object carries."""
    lab = labels(pod)
    if lab.get(LABEL_MANAGED_BY) != MANAGED_BY or LABEL_DEPLOYMENT not in lab or LABEL_CLUSTER not in lab:
        return None
    try:
        index = int(lab.get(LABEL_REPLICA_INDEX, ""))
    except ValueError:
        return None
    return ReplicaKey(str(meta(pod).get("namespace") or "default"), lab[LABEL_DEPLOYMENT], lab[LABEL_CLUSTER], index)


def pod_engine(pod: JsonMapping) -> str:
    return labels(pod).get(LABEL_ENGINE, "")


DeviceId = tuple[str, str, str]          # (driver, pool, device) as DRA names an allocated device


def claim_devices(claim: JsonMapping) -> list[DeviceId]:
    """The devices a ResourceClaim's allocation holds."""
    status = claim.get("status") if isinstance(claim.get("status"), dict) else {}
    allocation = (status or {}).get("allocation") or {}
    results = (allocation.get("devices") or {}).get("results") or [] if isinstance(allocation, dict) else []
    return [(str(r.get("driver")), str(r.get("pool")), str(r.get("device")))
            for r in results if isinstance(r, dict)]


def claim_owner_pod(claim: JsonMapping) -> tuple[str, str] | None:
    """(namespace, pod) of the pod a claim was generated for (its controlling owner)."""
    for ref in meta(claim).get("ownerReferences") or []:
        if isinstance(ref, dict) and ref.get("kind") == "Pod" and ref.get("controller"):
            return str(meta(claim).get("namespace") or ""), str(ref.get("name"))
    return None


@dataclass(frozen=True)
class SliceDevice:
    node: str
    driver: str


def published_devices(slices: Iterable[JsonObject]) -> dict[DeviceId, SliceDevice]:
    """Every node-local device the ResourceSlices publish, by (driver, pool, device); for a pool
    published in several generations only the newest counts (what the scheduler allocates from)."""
    newest: dict[tuple[str, str], int] = {}
    for s in slices:
        spec = s.get("spec") or {}
        pool = spec.get("pool") or {}
        key = (str(spec.get("driver")), str(pool.get("name")))
        newest[key] = max(newest.get(key, 0), int(pool.get("generation") or 0))
    out: dict[DeviceId, SliceDevice] = {}
    for s in slices:
        spec = s.get("spec") or {}
        pool = spec.get("pool") or {}
        driver, pool_name = str(spec.get("driver")), str(pool.get("name"))
        node = spec.get("nodeName")
        if not node or int(pool.get("generation") or 0) != newest[(driver, pool_name)]:
            continue
        for device in spec.get("devices") or []:
            if isinstance(device, dict) and device.get("name"):
                out[(driver, pool_name, str(device["name"]))] = SliceDevice(str(node), driver)
    return out
