"""kind-node-digest, and the examples that ship Kind clusters.

kubernetes-sigs/kind site/content/docs/user/quick-start.md: "Please use the `sha256` shasum for
your desired kubernetes version"; kind v0.32.0 pkg/apis/config/defaults/image.go pins its own
default (`Image`) by digest, the image the examples use."""

from pathlib import Path

import pytest

from modelplane.api import load_manifests
from modelplane.api.inference_cluster import DEFAULT_KIND_NODE_IMAGE
from modelplane.checks.kind_node_digest import pinned_by_digest

from .fleets import messages
from .test_kind_node_image import kind

POLICY = "kind-node-digest"
EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
# silent-failures keeps a bare, deadlocking tag on purpose (kind-node-image must trip on it).
ON_PURPOSE = {"silent-failures"}


def test_every_example_kind_node_image_is_pinned_by_digest() -> None:
    """Issue 27 item 13: examples/secure and examples/autoscaling* used the bare tag v1.35.1."""
    seen = []
    for example in sorted(p for p in EXAMPLES.iterdir() if p.is_dir() and p.name not in ON_PURPOSE):
        for cluster in load_manifests(example).clusters.values():
            if cluster.source == "Kind" and cluster.spec.cluster.kind is not None:
                seen.append(example.name)
                assert pinned_by_digest(cluster.spec.cluster.kind.node_image), (example.name, cluster.metadata.name)
    assert {"secure", "autoscaling", "autoscaling-live", "kind"} <= set(seen)


@pytest.mark.parametrize("image", [None, DEFAULT_KIND_NODE_IMAGE])
def test_an_image_pinned_by_digest_passes(image) -> None:
    assert messages([kind(image)], POLICY) == []


@pytest.mark.parametrize("image", ["kindest/node:v1.35.1", "kindest/node:v1.36.1@sha256:0123abcd",
                                   "kindest/node:v1.36.1@sha256:" + "G" * 64])
def test_a_tag_without_a_full_digest_is_advised(image) -> None:
    [message] = messages([kind(image)], POLICY)
    assert message.startswith("[advisory] kind-node-digest: InferenceCluster/local (fleet.yaml#0) "
                              f"spec.cluster.kind.nodeImage: node image {image!r} is not pinned by digest")
    assert DEFAULT_KIND_NODE_IMAGE in message
