"""Issue 9, item 6 and the low items on types: names are matched whole (a trailing newline
is not a name), and numbers and booleans are as strict as the Kubernetes API's."""

from __future__ import annotations

import pytest

from modelplane.api import ManifestError, load_documents
from tests.manifests import cluster, deployment, gpu_class, model_cache, pool

SERVICE = {"apiVersion": "modelplane.ai/v1alpha1", "kind": "ModelService",
           "metadata": {"name": "chat", "namespace": "default"},
           "spec": {"endpoints": [{"name": "main", "weight": 1,
                                   "selector": {"matchLabels": {"modelplane.ai/deployment": "m"}}}],
                    "timeouts": {"request": "300s"}}}
GATEWAY = {"apiVersion": "modelplane.ai/v1alpha1", "kind": "InferenceGateway", "metadata": {"name": "gw"},
           "spec": {"clusterName": "eu-west", "hostname": "api.example.com"}}


def fleet() -> list[dict]:
    c = cluster("eu-west", pool("p1", "g1", 2), labels={"example.org/region": "eu"})
    c["spec"]["gateway"] = {"hostname": "gw.eu.example.com"}
    return [gpu_class("g1"), c, deployment("m", 2, cache="qwen"), model_cache("qwen"), SERVICE, GATEWAY]


def set_at(docs: list[dict], doc: int, path: tuple, value: object) -> list[dict]:
    import copy

    docs = copy.deepcopy(docs)
    target = docs[doc]
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = value
    return docs


def rejected(docs: list[dict]) -> str:
    with pytest.raises(ManifestError) as err:
        load_documents(docs)
    return str(err.value)


def test_the_fleet_loads():
    assert sorted(load_documents(fleet()).clusters) == ["eu-west"]


NAMES = {
    "cluster name": (1, ("metadata", "name")),
    "namespace": (2, ("metadata", "namespace")),
    "engine name": (2, ("spec", "template", "spec", "engines", 0, "name")),
    "device request name": (2, ("spec", "template", "spec", "engines", 0, "members", 0, "nodeSelector",
                                "devices", 0, "name")),
    "node pool name": (1, ("spec", "nodePools", 0, "name")),
    "cluster gateway hostname": (1, ("spec", "gateway", "hostname")),
    "gateway hostname": (5, ("spec", "hostname")),
    "service entry name": (4, ("spec", "endpoints", 0, "name")),
    "timeout": (4, ("spec", "timeouts", "request")),
}


@pytest.mark.parametrize("name", sorted(NAMES))
@pytest.mark.parametrize("suffix", ["\n", "\r\n", " "])
def test_6_names_are_matched_whole_a_trailing_newline_is_not_a_name(name, suffix):
    doc, path = NAMES[name]
    docs = fleet()
    value = docs[doc]
    for part in path:
        value = value[part]
    assert rejected(set_at(docs, doc, path, value + suffix))


@pytest.mark.parametrize("where, value", [
    ((1, ("metadata", "labels")), {"example.org/region": "eu\n"}),
    ((1, ("metadata", "labels")), {"example.org/region\n": "eu"}),
    ((2, ("spec", "template", "metadata")), {"labels": {"example.org/team\n": "a"}}),
])
def test_6_label_keys_and_values_are_matched_whole(where, value):
    doc, path = where
    assert rejected(set_at(fleet(), doc, path, value))


@pytest.mark.parametrize("doc, path, value", [
    (2, ("spec", "replicas"), True),
    (2, ("spec", "replicas"), "3"),
    (2, ("spec", "replicas"), 2.0),
    (4, ("spec", "endpoints", 0, "weight"), True),
    (4, ("spec", "endpoints", 0, "weight"), "10"),
    (1, ("spec", "nodePools", 0, "nodeCount"), "2"),
    (3, ("spec", "huggingFace", "sizeGiB"), 10.0),
    (1, ("metadata", "labels"), {"example.org/region": 1}),
])
def test_strict_types_like_the_kubernetes_api(doc, path, value):
    message = rejected(set_at(fleet(), doc, path, value))
    assert "Input should be a valid" in message
