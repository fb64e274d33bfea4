"""Namespaces: the deployments' and caches' own, once per cluster, and the platform's."""

from __future__ import annotations

from modelplane.vocabulary import (
    LABEL_CLUSTER,
    LABEL_MANAGED_BY,
    LABEL_NAMESPACE,
    MANAGED_BY,
    SYSTEM_NAMESPACE,
    Manifest,
)

from .meta import component_labels, metadata

# Present on every cluster already; creating them would fail or, worse, let the program
# delete them when the last deployment leaves.
BUILTIN_NAMESPACES = frozenset({"default", "kube-system", "kube-public", "kube-node-lease"})


def render_namespace(namespace: str, cluster_name: str) -> Manifest:
    labels = {LABEL_MANAGED_BY: MANAGED_BY, LABEL_NAMESPACE: namespace, LABEL_CLUSTER: cluster_name}
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": metadata(namespace, labels)}


def render_system_namespace(cluster_name: str) -> Manifest:
    """`modelplane-system`: the gateways and the pool labeler run there."""
    labels = component_labels("system", {LABEL_CLUSTER: cluster_name})
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": metadata(SYSTEM_NAMESPACE, labels)}
