"""The Modelplane API: one module per kind, loaded from reference-style YAML manifests."""

from .common import API_VERSION, LabelSelector
from .fleet import Fleet
from .inference_class import InferenceClass
from .inference_cluster import InferenceCluster, NodePool
from .inference_gateway import InferenceGateway
from .loader import (
    KINDS,
    ManifestError,
    ManifestIssue,
    load_documents,
    load_manifest_bytes,
    load_manifest_text,
    load_manifests,
)
from .model_cache import ModelCache
from .model_deployment import Engine, Member, ModelDeployment
from .model_endpoint import ModelEndpoint
from .model_service import ModelService
from .replica_autoscaler import ReplicaAutoscaler

__all__ = [
    "API_VERSION", "Engine", "Fleet", "InferenceClass", "InferenceCluster", "InferenceGateway", "KINDS",
    "LabelSelector", "ManifestError", "ManifestIssue", "Member", "ModelCache", "ModelDeployment",
    "ModelEndpoint", "ModelService", "NodePool", "ReplicaAutoscaler", "load_documents", "load_manifest_bytes",
    "load_manifest_text", "load_manifests",
]
