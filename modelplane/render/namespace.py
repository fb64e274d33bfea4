"""The workload namespace: the deployment's own namespace, once per cluster."""

from __future__ import annotations

from .meta import LABEL_CLUSTER, LABEL_MANAGED_BY, LABEL_NAMESPACE, MANAGED_BY, metadata

# Present on every cluster already; creating them would fail or, worse, let the program
# delete them when the last deployment leaves.
BUILTIN_NAMESPACES = frozenset({"default", "kube-system", "kube-public", "kube-node-lease"})


def render_namespace(namespace: str, cluster_name: str) -> dict:
    labels = {LABEL_MANAGED_BY: MANAGED_BY, LABEL_NAMESPACE: namespace, LABEL_CLUSTER: cluster_name}
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": metadata(namespace, labels)}
