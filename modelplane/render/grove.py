"""Leader + Worker engine on the Dynamo stack -> Grove PodCliqueSet (semantics §3.6, shapes §5.1)."""

from __future__ import annotations

from modelplane.vocabulary import LABEL_ENGINE, LABEL_KAI_QUEUE, Manifest

from .context import MemberContext
from .meta import KAI_QUEUE, metadata
from .names import GROVE_GANG_GROUP, GROVE_LEADER_CLIQUE, GROVE_WORKER_CLIQUE, podcliqueset_name
from .pod import pod_annotations, pod_labels, pod_spec


def _clique(m: MemberContext, name: str, pods: int) -> Manifest:
    clique: Manifest = {"name": name, "labels": pod_labels(m)}
    annotations = pod_annotations(m)
    if annotations:
        clique["annotations"] = annotations
    clique["spec"] = {"roleName": name, "replicas": pods, "minAvailable": pods, "podSpec": pod_spec(m)}
    return clique


def render_podcliqueset(leader: MemberContext, worker: MemberContext) -> Manifest:
    r = leader.replica
    engine = leader.engine
    labels = {**r.labels, LABEL_ENGINE: engine.name, LABEL_KAI_QUEUE: KAI_QUEUE}
    return {
        "apiVersion": "grove.io/v1alpha1",
        "kind": "PodCliqueSet",
        "metadata": metadata(podcliqueset_name(r.name, engine.name), labels, r.namespace),
        "spec": {
            # Grove defaults replicas to 0; copies scale the gang group, not the set.
            "replicas": 1,
            "template": {
                # Any order, like LWS: a vLLM leader only turns Ready once its workers
                # joined, so workers must not wait for the leader's readiness.
                "cliqueStartupType": "CliqueStartupTypeAnyOrder",
                "terminationDelay": "4h",
                # Workers resolve the leader before it is Ready.
                "headlessServiceConfig": {"publishNotReadyAddresses": True},
                "cliques": [_clique(leader, GROVE_LEADER_CLIQUE, 1),
                            _clique(worker, GROVE_WORKER_CLIQUE, worker.member.pods)],
                "podCliqueScalingGroups": [{
                    "name": GROVE_GANG_GROUP,
                    "cliqueNames": [GROVE_LEADER_CLIQUE, GROVE_WORKER_CLIQUE],
                    "replicas": engine.copies,
                    "minAvailable": 1,
                }],
            },
        },
    }
