"""Manifest sets for the engine tests, written to temp dirs, and the reference placement for them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.manifests import (
    FAKE_DRIVER,
    cluster,
    deployment,
    engine,
    fake_gpu_class,
    kind_source,
    mem_at_least,
    member,
    pool,
    request,
    to_yaml,
)

REPO = Path(__file__).resolve().parents[2]

_CLASS = fake_gpu_class(
    attributes={"model": {"string": "LATEST-GPU-MODEL"}, "driverVersion": {"version": "1.0.0"}},
    description="One fake GPU per node (engine tests).",
)
AT_LEAST_20GI = mem_at_least(20, FAKE_DRIVER)


def _cluster(name: str, nodes: int) -> dict:
    return cluster(name, pool("gpu", "fake-gpu", nodes), labels={"modelplane.ai/region": name},
                   source=kind_source("kindest/node:v1.35.1"), gateway_hostname=f"{name}.gateway.example.test")


def _deployment(name: str, replicas: int) -> dict:
    mock = member("Standalone", request("gpu", 1, AT_LEAST_20GI), image="python:3.12-alpine",
                  command=["python", "-m", "http.server", "8000"])
    return deployment(name, replicas, engine("mock", mock), namespace="ml-team")


def scaling_fleet(directory: Path, replicas: int) -> Path:
    """Two clusters (alpha: 3 GPU nodes, beta: 2) and one deployment `chat` with `replicas`."""
    directory.mkdir(parents=True, exist_ok=True)
    docs = [_CLASS, _cluster("alpha", 3), _cluster("beta", 2), _deployment("chat", replicas)]
    path = directory / "fleet.yaml"
    path.write_text(to_yaml(docs))
    return directory


def reference_placement(manifests: Path, previous: Any = None) -> Any:
    from modelplane.api import load_manifests
    from modelplane.scheduler import place_fleet

    return place_fleet(load_manifests(manifests), previous)
