"""Labels, well-known values and object metadata shared by every renderer."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from modelplane.api.placement import CLUSTER_NAME_KEY

# A Kubernetes object as plain JSON-like data: what every renderer returns.
Manifest = dict[str, Any]

GROUP = "modelplane.ai/"
LABEL_DEPLOYMENT = GROUP + "deployment"
# The key spread and tiers group clusters by (modelplane.api.placement) is this label.
LABEL_CLUSTER = CLUSTER_NAME_KEY
LABEL_REPLICA_INDEX = GROUP + "replica-index"
LABEL_SERVING = GROUP + "serving"
LABEL_WORKLOAD = GROUP + "workload"
LABEL_ENGINE = GROUP + "engine"
LABEL_POOL = GROUP + "pool"
LABEL_LWS_ROLE = GROUP + "lws-role"
LABEL_CLIQUE_ROLE = GROUP + "clique-role"
LABEL_MODELCACHE = GROUP + "modelcache"
LABEL_NAMESPACE = GROUP + "namespace"
# Nodes of provisioned clusters' system pools (not GPU pools).
LABEL_ROLE = GROUP + "role"
LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
LABEL_PART_OF = "app.kubernetes.io/part-of"
LABEL_COMPONENT = "app.kubernetes.io/component"
LABEL_PD_ROLE = "llm-d.ai/role"
LABEL_KAI_QUEUE = "kai.scheduler/queue"

MANAGED_BY = "modelplane"
PART_OF = "modelplane"
# Where the platform's own workloads run on every cluster: gateways, the pool labeler.
SYSTEM_NAMESPACE = "modelplane-system"
# Sources whose clusters and pools the program creates itself, labelling every pool's
# nodes with LABEL_POOL as it does; pools of any other source are labelled by a Job.
PROVISIONED_SOURCES = ("Kind", "EKS", "GKE")
ENGINE_CONTAINER = "engine"
ENGINE_PORT = 8000
CACHE_MOUNT = "/mnt/models"
CLAIM_NAME = "devices"
# The queue the Dynamo serving stack creates for modelplane workloads (semantics §3.6).
KAI_QUEUE = "modelplane"
KAI_SCHEDULER = "kai-scheduler"
MODELEXPRESS_NAME = "modelexpress-server"
MODELEXPRESS_PORT = 8001
MODELEXPRESS_ADDRESS = f"{MODELEXPRESS_NAME}:{MODELEXPRESS_PORT}"
NIXL_SIDE_CHANNEL_PORT = "5557"
# Opt-in to vLLM's `--load-format modelexpress` on Dynamo clusters: stock vLLM images need the
# `modelexpress` package for that loader (k8s-api-shapes.md §5.3), so it is never assumed.
ANNOTATION_MODELEXPRESS = GROUP + "modelexpress"
# huggingface_hub's own default revision; naming it explicitly lets the staging Job and
# the engines agree on one ref even when the cache leaves the revision unset.
DEFAULT_REVISION = "main"


class RenderError(ValueError):
    """The fleet cannot be turned into manifests (a dangling reference, a missing pool)."""


def metadata(name: str, labels: Mapping[str, str], namespace: str | None = None,
             annotations: Mapping[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
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
