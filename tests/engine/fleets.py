"""Manifest sets for the engine tests, written to temp dirs, and the reference placement for them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]

_CLASS = {
    "apiVersion": "modelplane.ai/v1alpha1",
    "kind": "InferenceClass",
    "metadata": {"name": "fake-gpu"},
    "spec": {
        "description": "One fake GPU per node (engine tests).",
        "devices": [{
            "name": "gpu", "claim": "DRA", "driver": "gpu.example.com", "deviceClassName": "gpu.example.com",
            "count": 1,
            "attributes": {"model": {"string": "LATEST-GPU-MODEL"}, "driverVersion": {"version": "1.0.0"}},
            "capacity": {"memory": {"value": "80Gi"}},
        }],
    },
}


def _cluster(name: str, nodes: int) -> dict:
    return {
        "apiVersion": "modelplane.ai/v1alpha1",
        "kind": "InferenceCluster",
        "metadata": {"name": name, "labels": {"modelplane.ai/region": name}},
        "spec": {
            "cluster": {"source": "Kind", "kind": {"nodeImage": "kindest/node:v1.35.1"}},
            "gateway": {"hostname": f"{name}.gateway.example.test"},
            "nodePools": [{"name": "gpu", "className": "fake-gpu", "nodeCount": nodes}],
        },
    }


def _deployment(name: str, replicas: int) -> dict:
    return {
        "apiVersion": "modelplane.ai/v1alpha1",
        "kind": "ModelDeployment",
        "metadata": {"name": name, "namespace": "ml-team"},
        "spec": {
            "replicas": replicas,
            "template": {"spec": {"engines": [{
                "name": "mock",
                "members": [{
                    "role": "Standalone",
                    "nodeSelector": {"devices": [{
                        "name": "gpu", "count": 1,
                        "selectors": [{"cel": 'device.capacity["gpu.example.com"].memory'
                                              '.compareTo(quantity("20Gi")) >= 0'}],
                    }]},
                    "template": {"spec": {"containers": [{
                        "name": "engine", "image": "python:3.12-alpine",
                        "command": ["python", "-m", "http.server", "8000"],
                    }]}},
                }],
            }]}},
        },
    }


def scaling_fleet(directory: Path, replicas: int) -> Path:
    """Two clusters (alpha: 3 GPU nodes, beta: 2) and one deployment `chat` with `replicas`."""
    directory.mkdir(parents=True, exist_ok=True)
    docs = [_CLASS, _cluster("alpha", 3), _cluster("beta", 2), _deployment("chat", replicas)]
    path = directory / "fleet.yaml"
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    return directory


def reference_placement(manifests: Path, previous: Any = None) -> Any:
    from modelplane.api import load_manifests
    from modelplane.scheduler import place_fleet

    return place_fleet(load_manifests(manifests), previous)
