"""kind-node-image: local clusters need a kubelet that serves DRA v1 and doesn't deadlock
it (mission: silent failure 9; k8s-api-shapes.md §1.1, §1.9)."""

from __future__ import annotations

import re
from collections.abc import Iterable

from modelplane.api.inference_cluster import DEFAULT_KIND_NODE_IMAGE

from .context import CheckContext
from .findings import MANDATORY, Finding
from .registry import register
from .tables import KIND_DRA_DEADLOCK, KIND_FIRST_SAFE, KIND_MIN_DRA_V1

POLICY = "kind-node-image"
_TAG = re.compile(r":v?(\d+)\.(\d+)\.(\d+)(?:[-+][^:/]*)?\Z")


def node_image_problem(image: str) -> str | None:
    m = _TAG.search(image.split("@", 1)[0])  # a digest pins bytes, the tag names the version
    if m is None:
        return (f"node image {image!r} has no vX.Y.Z tag, so its kubelet version cannot be "
                f"checked against the DRA deadlock of 1.34.0/1.34.1")
    version = tuple(int(g) for g in m.groups())
    shown = "v" + ".".join(map(str, version))
    if version in KIND_DRA_DEADLOCK:
        return (f"node image {image!r} runs kubelet {shown}, which deadlocks with DRA drivers "
                f"after ~30 idle minutes (kubernetes/kubernetes#133920): pods then hang in "
                f"ContainerCreating with no error until the kubelet is restarted")
    if version < KIND_MIN_DRA_V1:
        return (f"node image {image!r} runs Kubernetes {shown}, which predates DRA "
                f"resource.k8s.io/v1 (served from v1.34): the ResourceClaimTemplates the program "
                f"renders are rejected and no engine gets a GPU")
    return None


def node_image_error(image: str) -> str | None:
    """The problem with a Kind node image and its fix; None for a good image. The one rule
    for this check and for the program, which refuses to create such a cluster."""
    problem = node_image_problem(image)
    if problem is None:
        return None
    return (f"{problem}. Fix: use {DEFAULT_KIND_NODE_IMAGE} (the default) or any kindest/node "
            f"tag from {KIND_FIRST_SAFE} on.")


@register(POLICY, MANDATORY, "Kind node images must serve DRA v1 without the 1.34.0/1.34.1 "
          "kubelet deadlock")
def check(ctx: CheckContext) -> Iterable[Finding]:
    for cluster in ctx.fleet.clusters.values():
        kind = cluster.spec.cluster.kind
        if cluster.spec.cluster.source != "Kind" or kind is None:
            continue
        error = node_image_error(kind.node_image)
        if error:
            yield Finding(POLICY, MANDATORY, ctx.ref(cluster), "spec.cluster.kind.nodeImage", error)
