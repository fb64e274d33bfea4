"""Names of everything rendered on a workload cluster (semantics §0.2)."""

from __future__ import annotations

import hashlib

from modelplane.naming import child_name

# Grove spells every pod hostname as <pcs>-<i>-<group>-<j>-<clique>-<k>, which must stay a
# DNS label; 24 characters for the PodCliqueSet leaves room for the rest.
PCS_NAME_BUDGET = 24
# A LeaderWorkerSet's worker StatefulSet is `<lws>-<group index>`, and the StatefulSet
# controller labels its pods `controller-revision-hash: <statefulset>-<10-char hash>`, a label
# value capped at 63 characters: names above ~51 characters leave the workers uncreatable
# (kubernetes-sigs/lws#410, kubernetes/kubernetes#64023). 45 leaves room for a 6-digit index.
LWS_NAME_BUDGET = 45
REVISION_HASH_SUFFIX = 11  # "-" + the controller's 10-character revision hash
# The cliques and the scaling group of every PodCliqueSet we render.
GROVE_LEADER_CLIQUE = "leader"
GROVE_WORKER_CLIQUE = "worker"
GROVE_GANG_GROUP = "gang"


def _budgeted(joined: str, budget: int) -> str:
    digest = hashlib.sha256(joined.encode("utf-8")).hexdigest()[:5]
    return f"{joined[: budget - len(digest) - 1].rstrip('-')}-{digest}"


def workload_name(replica: str, engine: str) -> str:
    # Never the replica name itself: LWS and Grove create a headless Service named after
    # the workload, and the replica's serving Service already owns the replica name.
    return child_name(replica, engine)


def podcliqueset_name(replica: str, engine: str) -> str:
    return _budgeted(f"{replica}-{engine}", PCS_NAME_BUDGET)


def grove_leader_address(pcs: str, namespace: str, gang: str, gang_index: str, set_index: str) -> str:
    """DNS name of the leader pod of one gang of a PodCliqueSet, as Grove names it
    (ai-dynamo/grove v0.1.0-alpha.11 operator/api/common/namegen.go and
    podclique/components/pod/pod.go `configurePodHostname`): hostname `<pclq>-<pod index>`, the
    PodClique of a scaling group replica being `<pcsg>-<pcsg index>-<clique>` and the scaling
    group `<pcs>-<pcs index>-<group>` (what `gang` holds); subdomain the headless Service
    `<pcs>-<pcs index>`, `<svc>.<namespace>.svc.cluster.local`."""
    return f"{gang}-{gang_index}-{GROVE_LEADER_CLIQUE}-0.{pcs}-{set_index}.{namespace}.svc.cluster.local"


def lws_name(replica: str, engine: str) -> str:
    """`child_name(replica, engine)` when that fits LWS_NAME_BUDGET (the same hash), else cut."""
    return _budgeted(f"{replica}-{engine}", LWS_NAME_BUDGET)


def serving_service_name(replica: str) -> str:
    return replica


def cache_pvc_name(namespace: str, cache: str) -> str:
    return child_name("modelcache", namespace, cache)


def cache_job_name(namespace: str, cache: str) -> str:
    return child_name("modelcache", namespace, cache, "hydrate")


def cache_secret_name(namespace: str, cache: str) -> str:
    return child_name("modelcache", namespace, cache, "auth")
