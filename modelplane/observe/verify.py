"""Verification after `up`: does every replica the fleet placed really run where the plan put it?

Pure: `verify(fleet, placement, readings)` compares the placement with what was read from each
cluster and returns one `ReplicaCheck` per placed replica:

* every pod the replica's engines need (members x pods x copies) exists, is Running and Ready;
* on a node of the pool the plan chose for its member;
* its ResourceClaim is allocated with the device count the plan charged;
* otherwise why not, in the cluster's own words: the scheduler's message on the pod
  (`0/1 nodes are available: 1 cannot allocate all claims`), a container's waiting reason,
  or what is missing.
A replica on an unreachable cluster cannot be verified, which is not a success either.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from modelplane.api import Fleet
from modelplane.api.model_deployment import ModelDeployment
from modelplane.json_types import JsonMapping, JsonObject
from modelplane.naming import claim_template_name
from modelplane.redact import outside_text
from modelplane.scheduler import FleetPlacement, PlacedReplica
from modelplane.vocabulary import LABEL_POOL

from .objects import ReplicaKey, claim_devices, meta, name_of, pod_engine, pod_replica, pool_of
from .read import ClusterRead, NotRead, Reading, Unreachable

# After `up`: how long verification waits for placed replicas to run before it reports them
# (pulumi-kubernetes awaits Deployments, not the LeaderWorkerSets of gangs).
DEFAULT_VERIFY_WAIT_S = 30.0
READY = "Ready"
NOT_READY = "NotReady"
UNKNOWN = "Unknown"


@dataclass(frozen=True)
class ReplicaCheck:
    namespace: str
    deployment: str
    replica: str
    cluster: str
    index: int
    status: str                                   # Ready | NotReady | Unknown
    pods: int = 0                                 # pods Running and Ready where planned
    expected: int = 0                             # pods the plan needs
    problems: tuple[str, ...] = ()

    @property
    def ready(self) -> bool:
        return self.status == READY

    def to_json(self) -> JsonObject:
        return {"namespace": self.namespace, "deployment": self.deployment, "replica": self.replica,
                "cluster": self.cluster, "index": self.index, "status": self.status, "pods": self.pods,
                "expected": self.expected, "problems": list(self.problems)}


@dataclass(frozen=True)
class Verification:
    replicas: tuple[ReplicaCheck, ...] = ()
    strays: tuple[str, ...] = field(default=())   # pods of replicas the placement does not have

    @property
    def ok(self) -> bool:
        return all(r.ready for r in self.replicas)

    def not_ready(self) -> list[ReplicaCheck]:
        return [r for r in self.replicas if not r.ready]

    def to_json(self) -> JsonObject:
        return {"ok": self.ok, "replicas": [r.to_json() for r in self.replicas], "strays": list(self.strays)}

    def summary(self) -> str:
        bad = self.not_ready()
        if not bad:
            return f"all {len(self.replicas)} placed replica(s) run where the plan put them"
        return (f"{len(bad)} of {len(self.replicas)} placed replica(s) do not run as planned: "
                + "; ".join(f"{r.replica} on {r.cluster}: {r.problems[0] if r.problems else r.status}"
                            for r in bad))


@dataclass(frozen=True)
class _Member:
    engine: str
    index: int
    pools: frozenset[str]
    devices: int                                  # devices one pod's claim must hold
    template: str | None                          # its ResourceClaimTemplate, when it claims


def _condition(obj: JsonMapping, kind: str) -> JsonMapping | None:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if isinstance(c, dict) and c.get("type") == kind:
            return c
    return None


def _waiting(pod: JsonMapping) -> str | None:
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        waiting = (status.get("state") or {}).get("waiting") if isinstance(status, dict) else None
        if waiting:
            reason, message = waiting.get("reason", "Waiting"), waiting.get("message", "")
            return f"container {status.get('name')}: {reason}" + (f": {message}" if message else "")
    return None


def pod_problem(pod: JsonMapping) -> str | None:
    """Why a pod is not Running and Ready, in the cluster's words; None when it is."""
    status = pod.get("status") or {}
    phase = status.get("phase", "Unknown")
    scheduled = _condition(pod, "PodScheduled")
    if scheduled is not None and scheduled.get("status") == "False":
        return f"Pending, not scheduled: {scheduled.get('message') or scheduled.get('reason') or 'no reason given'}"
    if phase == "Running":
        ready = _condition(pod, "Ready")
        if ready is not None and ready.get("status") == "True":
            return None
        return "Running, not Ready: " + (_waiting(pod) or (ready or {}).get("message") or "readiness probe failing")
    detail = _waiting(pod) or status.get("message") or status.get("reason") or ""
    return f"{phase}" + (f": {detail}" if detail else "")


def _members(dep: ModelDeployment, replica: PlacedReplica) -> list[tuple[_Member, int]]:
    """Each member of each engine with the number of pods it needs."""
    out = []
    for engine in dep.spec.template.spec.engines:
        placed = replica.engines.get(engine.name)
        if placed is None:
            continue
        pools = placed.pools_for(len(engine.members))
        for i, member in enumerate(engine.members):
            requests = placed.requests[i] if i < len(placed.requests) else ()
            devices = sum(q.count for q in requests)
            template = claim_template_name(replica.name, engine.name, member.role) if requests else None
            out.append((_Member(engine.name, i, frozenset({pools[i]}), devices, template),
                        member.pods * (engine.copies or 1)))
    return out


def _claim_names(pod: JsonMapping) -> dict[str, str]:
    """resourceClaims entry name -> the generated ResourceClaim's name."""
    out = {}
    for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []:
        if isinstance(s, dict) and s.get("resourceClaimName"):
            out[str(s.get("name"))] = str(s["resourceClaimName"])
    return out


def _templates(pod: JsonMapping) -> dict[str, str]:
    """resourceClaims entry name -> its ResourceClaimTemplate."""
    return {str(c.get("name")): str(c.get("resourceClaimTemplateName"))
            for c in (pod.get("spec") or {}).get("resourceClaims") or []
            if isinstance(c, dict) and c.get("resourceClaimTemplateName")}


def _check_replica(fleet: Fleet, namespace: str, deployment: str, replica: PlacedReplica,
                   reading: ClusterRead, pods: list[JsonMapping]) -> ReplicaCheck:
    dep = fleet.deployments.get((namespace, deployment))
    if dep is None:
        return _result(namespace, deployment, replica, UNKNOWN, ("the deployment is not in the fleet",))
    cluster = fleet.clusters[replica.cluster]
    nodes = {name_of(n): n for n in reading.nodes}
    claims = {(str(meta(c).get("namespace")), name_of(c)): c for c in reading.claims}
    problems: list[str] = []
    good = expected = 0
    members = _members(dep, replica)
    by_engine: dict[str, list[JsonMapping]] = {}
    for pod in pods:
        by_engine.setdefault(pod_engine(pod), []).append(pod)
    for member, want in members:
        expected += want
        candidates = by_engine.get(member.engine, [])
        if member.template is not None:
            mine = [p for p in candidates if member.template in _templates(p).values()]
        else:
            mine = [p for p in candidates if not _templates(p)
                    and ((p.get("spec") or {}).get("nodeSelector") or {}).get(LABEL_POOL) in member.pools]
        what = f"engine {member.engine} member {member.index}"
        if len(mine) < want:
            problems.append(f"{what}: {len(mine)} of {want} pod(s) exist")
        for pod in sorted(mine, key=name_of):
            pname = name_of(pod)
            why = pod_problem(pod)
            node_name = (pod.get("spec") or {}).get("nodeName")
            if why is None and node_name:
                node = nodes.get(str(node_name))
                pool = pool_of(cluster, node) if node is not None else None
                if pool not in member.pools:
                    why = (f"runs on node {node_name} of pool {pool or 'none'}, the plan chose "
                           f"{', '.join(sorted(member.pools))}")
            if why is None and member.template is not None:
                entry = next((k for k, v in _templates(pod).items() if v == member.template), "")
                claim = claims.get((namespace, _claim_names(pod).get(entry, "")))
                held = len(claim_devices(claim)) if claim is not None else 0
                if claim is None:
                    why = "its ResourceClaim does not exist"
                elif held != member.devices:
                    why = f"its ResourceClaim holds {held} device(s), the plan charged {member.devices}"
            if why is None:
                good += 1
            else:
                # The pod's name and the cluster's words are outside text: capped, no control characters.
                problems.append(outside_text(f"pod {pname}: {why}"))
    status = READY if good >= expected and not problems else NOT_READY
    return _result(namespace, deployment, replica, status, tuple(problems), good, expected)


def _result(namespace: str, deployment: str, replica: PlacedReplica, status: str, problems: tuple[str, ...],
            pods: int = 0, expected: int = 0) -> ReplicaCheck:
    return ReplicaCheck(namespace, deployment, replica.name, replica.cluster, replica.index, status, pods,
                        expected, problems)


def verify(fleet: Fleet, placement: FleetPlacement, readings: Mapping[str, Reading]) -> Verification:
    """Every placed replica checked against the cluster it was placed on."""
    pods_by_replica: dict[ReplicaKey, list[JsonMapping]] = {}
    for name, reading in readings.items():
        if isinstance(reading, ClusterRead):
            for pod in reading.pods:
                key = pod_replica(pod)
                if key is not None and key.cluster == name and not meta(pod).get("deletionTimestamp"):
                    pods_by_replica.setdefault(key, []).append(pod)
    checks = []
    planned: set[ReplicaKey] = set()
    for dep in placement.deployments:
        for replica in dep.replicas:
            key = ReplicaKey(dep.namespace, dep.name, replica.cluster, replica.index)
            planned.add(key)
            found = readings.get(replica.cluster)
            if found is None:
                checks.append(_result(dep.namespace, dep.name, replica, UNKNOWN,
                                      ("cluster not observed (no kubeconfig)",)))
            elif isinstance(found, Unreachable):
                checks.append(_result(dep.namespace, dep.name, replica, UNKNOWN,
                                      (f"cluster unreachable: {found.reason}",)))
            elif isinstance(found, NotRead):
                checks.append(_result(dep.namespace, dep.name, replica, UNKNOWN,
                                      (f"cluster not observed: {found.reason}",)))
            else:
                checks.append(_check_replica(fleet, dep.namespace, dep.name, replica, found,
                                             pods_by_replica.get(key, [])))
    strays = sorted(outside_text(f"{key} ({len(pods)} pod(s))")
                    for key, pods in pods_by_replica.items() if key not in planned)
    return Verification(tuple(checks), tuple(strays))
