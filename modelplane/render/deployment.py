"""Standalone engine -> apps/v1 Deployment (semantics §3.3)."""

from __future__ import annotations

from modelplane.vocabulary import LABEL_ENGINE, LABEL_WORKLOAD, Manifest

from .cache import hugging_face
from .context import MemberContext
from .meta import metadata
from .names import workload_name
from .pod import pod_template
from .readiness import engine_timeout_s, with_timeout


def render_deployment(m: MemberContext) -> Manifest:
    r = m.replica
    name = workload_name(r.name, m.engine.name)
    size = hugging_face(r.cache).size_gib if r.cache is not None else None
    return with_timeout({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": metadata(name, {**r.labels, LABEL_ENGINE: m.engine.name}, r.namespace),
        "spec": {
            "replicas": m.engine.copies,
            # Per workload, not per replica: two Standalone engines of one replica share
            # the serving label and must not adopt each other's pods.
            "selector": {"matchLabels": {LABEL_WORKLOAD: name}},
            # The ledger charged exactly `copies` pods of devices; a surge pod would wait
            # for devices nobody reserved, so roll by replacing one pod at a time.
            "strategy": {"type": "RollingUpdate",
                         "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}},
            "template": pod_template(m),
        },
    }, engine_timeout_s(size))
