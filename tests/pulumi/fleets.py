"""Small fleets for the provider and program tests, as manifest text (tests/manifests.py builds them)."""

from __future__ import annotations

from modelplane.api import load_manifest_text
from tests.manifests import (
    FAKE_DRIVER,
    cluster,
    deployment,
    engine,
    fake_gpu_class,
    kind_source,
    mem_at_least,
    member,
    model_service,
    pool,
    request,
    service_entry,
    taint,
    to_yaml,
)

FAKE_GPU = fake_gpu_class()
AT_LEAST_20GI = mem_at_least(20, FAKE_DRIVER)


def _chat_service() -> dict:
    """`chat`: 90/10 over deployments chat (stable) and chat-canary (canary)."""
    return model_service(
        "chat",
        service_entry({"modelplane.ai/deployment": "chat"}, weight=90, name="stable"),
        service_entry({"modelplane.ai/deployment": "chat-canary"}, weight=10, name="canary"),
        namespace="ml-team",
    )


def fleet_text(clusters: dict[str, int], deployments: dict[str, int], copies: int = 1,
               tainted: dict[str, str] | None = None, service: bool = False,
               node_image: str | None = None) -> str:
    """`clusters`: name -> nodes; `deployments`: name -> replicas; `tainted`: cluster -> effect;
    `node_image`: every Kind cluster's kindest/node image (else the default)."""
    docs = [FAKE_GPU]
    for name, nodes in clusters.items():
        effect = (tainted or {}).get(name)
        docs.append(cluster(name, pool("gpu", "fake-gpu", nodes), labels={"modelplane.ai/region": name},
                            taints=[taint("maintenance", effect)] if effect else None,
                            source=kind_source(node_image)))
    for name, replicas in deployments.items():
        mock = member("Standalone", request("gpu", 1, AT_LEAST_20GI), image="python:3.12-alpine")
        docs.append(deployment(name, replicas, engine("mock", mock, copies=copies), namespace="ml-team"))
    if service:
        docs.append(_chat_service())
    return to_yaml(docs)


def documents(text: str) -> list[dict]:
    return load_manifest_text(text).to_documents()
