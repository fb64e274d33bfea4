import pytest

from .fleets import messages

POLICY = "kind-node-image"
KIND = """
apiVersion: modelplane.ai/v1alpha1
kind: InferenceCluster
metadata:
  name: local
spec:
  cluster:
    source: Kind
    kind: %s
"""
FIX = (". Fix: use kindest/node:v1.36.1@sha256:3489c7674813ba5d8b1a9977baea8a6e553784dab7b84759d1014dbd78f7ebd5"
       " (the default) or any kindest/node tag from v1.34.2 on.")


def kind(image: str | None) -> str:
    return KIND % ("{}" if image is None else f"{{nodeImage: '{image}'}}")


@pytest.mark.parametrize("image", [None, "kindest/node:v1.34.2", "kindest/node:v1.36.1@sha256:0123abcd",
                                   "registry.local:5000/kindest/node:v1.35.0"])
def test_dra_v1_images_without_the_deadlock_pass(image):
    assert messages([kind(image)], POLICY) == []


@pytest.mark.parametrize("tag", ["v1.34.0", "v1.34.1"])
def test_deadlocking_kubelets_fail(tag):
    assert messages([kind(f"kindest/node:{tag}")], POLICY) == [
        "[mandatory] kind-node-image: InferenceCluster/local (fleet.yaml#0) spec.cluster.kind.nodeImage: "
        f"node image 'kindest/node:{tag}' runs kubelet {tag}, which deadlocks with DRA drivers after ~30 "
        "idle minutes (kubernetes/kubernetes#133920): pods then hang in ContainerCreating with no error "
        "until the kubelet is restarted" + FIX
    ]


def test_images_before_dra_v1_fail():
    assert messages([kind("kindest/node:v1.33.4")], POLICY) == [
        "[mandatory] kind-node-image: InferenceCluster/local (fleet.yaml#0) spec.cluster.kind.nodeImage: "
        "node image 'kindest/node:v1.33.4' runs Kubernetes v1.33.4, which predates DRA resource.k8s.io/v1 "
        "(served from v1.34): the ResourceClaimTemplates the program renders are rejected and no engine "
        "gets a GPU" + FIX
    ]


def test_unversioned_images_fail():
    assert messages([kind("kindest/node:latest")], POLICY) == [
        "[mandatory] kind-node-image: InferenceCluster/local (fleet.yaml#0) spec.cluster.kind.nodeImage: "
        "node image 'kindest/node:latest' has no vX.Y.Z tag, so its kubelet version cannot be checked "
        "against the DRA deadlock of 1.34.0/1.34.1" + FIX
    ]
