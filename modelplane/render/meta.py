"""Object metadata and the well-known values every renderer shares (label keys live in
modelplane.vocabulary, below every layer)."""

from __future__ import annotations

from collections.abc import Mapping

from modelplane.json_types import JsonObject
from modelplane.vocabulary import (
    LABEL_CLUSTER,
    LABEL_COMPONENT,
    LABEL_DEPLOYMENT,
    LABEL_MANAGED_BY,
    LABEL_PART_OF,
    LABEL_REPLICA_INDEX,
    MANAGED_BY,
    PART_OF,
)

CACHE_MOUNT = "/mnt/models"
CLAIM_NAME = "devices"
# The queue the Dynamo serving stack creates for modelplane workloads (semantics §3.6).
KAI_QUEUE = "modelplane"
KAI_SCHEDULER = "kai-scheduler"
MODELEXPRESS_NAME = "modelexpress-server"
MODELEXPRESS_PORT = 8001
MODELEXPRESS_ADDRESS = f"{MODELEXPRESS_NAME}:{MODELEXPRESS_PORT}"
NIXL_SIDE_CHANNEL_PORT = "5557"
# huggingface_hub's own default revision; naming it explicitly lets the staging Job and
# the engines agree on one ref even when the cache leaves the revision unset.
DEFAULT_REVISION = "main"


class RenderError(ValueError):
    """The fleet cannot be turned into manifests (a dangling reference, a missing pool)."""


def metadata(name: str, labels: Mapping[str, str], namespace: str | None = None,
             annotations: Mapping[str, str] | None = None) -> JsonObject:
    meta: JsonObject = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    meta["labels"] = dict(sorted(labels.items()))
    if annotations:
        meta["annotations"] = dict(sorted(annotations.items()))
    return meta


def component_labels(component: str, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """Labels of the platform's own objects (gateways, serving stack, pool labeler)."""
    return {LABEL_PART_OF: PART_OF, LABEL_MANAGED_BY: MANAGED_BY, LABEL_COMPONENT: component, **(extra or {})}


def replica_labels(deployment_name: str, cluster_name: str, index: int) -> dict[str, str]:
    """The identity every object of one replica carries; the name hides cluster and index."""
    return {
        LABEL_MANAGED_BY: MANAGED_BY,
        LABEL_DEPLOYMENT: deployment_name,
        LABEL_CLUSTER: cluster_name,
        LABEL_REPLICA_INDEX: str(index),
    }
