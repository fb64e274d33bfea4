"""The mock engine on the Kind stack: its source in a ConfigMap, mounted into engine pods.

Kind regions have fake GPUs (dra-example-driver), so no real engine can run there; the
examples start `python /opt/modelplane/mock_engine.py` from a stock Python image
instead. Shipping the file as a ConfigMap keeps the local stack free of custom images.
"""

from __future__ import annotations

from pathlib import Path

from modelplane.api import InferenceCluster
from modelplane.vocabulary import LABEL_CLUSTER, LABEL_MANAGED_BY, MANAGED_BY, Manifest

from .meta import metadata

CONFIGMAP_NAME = "modelplane-mock-engine"
MOUNT_PATH = "/opt/modelplane"
VOLUME = "mock-engine"
_SOURCE = Path(__file__).resolve().parent.parent / "runtime" / "mock_engine.py"


def ships_mock_engine(cluster: InferenceCluster) -> bool:
    return cluster.spec.cluster.source == "Kind"


def render_mock_engine_configmap(namespace: str, cluster_name: str) -> Manifest:
    labels = {LABEL_MANAGED_BY: MANAGED_BY, LABEL_CLUSTER: cluster_name}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata(CONFIGMAP_NAME, labels, namespace),
            "data": {"mock_engine.py": _SOURCE.read_text()}}


def mock_engine_volume() -> Manifest:
    # optional: a pod must not hang on a missing ConfigMap; the engine then fails visibly.
    return {"name": VOLUME, "configMap": {"name": CONFIGMAP_NAME, "optional": True}}


def mock_engine_mount() -> Manifest:
    return {"name": VOLUME, "mountPath": MOUNT_PATH, "readOnly": True}
