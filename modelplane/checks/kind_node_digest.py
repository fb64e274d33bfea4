"""kind-node-digest: a Kind node image pinned by tag only may be a build for another kind release.

kindest/node images are built for one kind release, which lists them with their digests; the
kind quick start asks for the `sha256` (kubernetes-sigs/kind site/content/docs/user/quick-start.md:
"Please use the `sha256` shasum for your desired kubernetes version"). A bare tag can be
re-pushed, or name an image built for a different kind, whose node may not boot. Advisory:
the cluster still comes up in the common case; the shipped examples pin by digest.
"""

from __future__ import annotations

from collections.abc import Iterable

from modelplane.api.inference_cluster import DEFAULT_KIND_NODE_IMAGE

from .context import CheckContext
from .findings import ADVISORY, Finding
from .registry import register

POLICY = "kind-node-digest"
DIGEST = "@sha256:"


def pinned_by_digest(image: str) -> bool:
    """The image reference names its bytes (`<repo>:<tag>@sha256:<64 hex>`)."""
    _, sep, digest = image.partition(DIGEST)
    return bool(sep) and len(digest) == 64 and all(c in "0123456789abcdef" for c in digest)


@register(POLICY, ADVISORY, "Kind node images should be pinned by digest (kind release notes list them so)")
def check(ctx: CheckContext) -> Iterable[Finding]:
    for cluster in ctx.fleet.clusters.values():
        kind = cluster.spec.cluster.kind
        if cluster.source != "Kind" or kind is None or pinned_by_digest(kind.node_image):
            continue
        yield Finding(POLICY, ADVISORY, ctx.ref(cluster), "spec.cluster.kind.nodeImage",
                      f"node image {kind.node_image!r} is not pinned by digest: kind builds node images for one "
                      "kind release and lists them with their sha256, and a tag alone may name a rebuilt image or "
                      "one made for another kind, whose node may not boot. Fix: append the digest from the kind "
                      f"release notes, e.g. {DEFAULT_KIND_NODE_IMAGE} (the default).")
