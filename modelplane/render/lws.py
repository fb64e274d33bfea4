"""Leader + Worker engine on the Default stack -> LeaderWorkerSet (semantics §3.4, shapes §4)."""

from __future__ import annotations

from modelplane.vocabulary import LABEL_ENGINE, Manifest

from .context import MemberContext
from .meta import metadata
from .names import lws_name
from .pod import pod_template


def render_lws(leader: MemberContext, worker: MemberContext) -> Manifest:
    r = leader.replica
    engine = leader.engine
    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": metadata(lws_name(r.name, engine.name), {**r.labels, LABEL_ENGINE: engine.name},
                             r.namespace),
        "spec": {
            "replicas": engine.copies,
            "leaderWorkerTemplate": {
                "size": 1 + worker.member.pods,
                "leaderTemplate": pod_template(leader),
                "workerTemplate": pod_template(worker),
            },
        },
    }
