"""Pulumi components of the Modelplane fleet (type tokens `modelplane:index:<Type>`).

Importing this package registers nothing; `deploy_fleet` does, from `FleetArgs`.
"""

from components.args import AwsArgs, ClusterAccess, ControlPlaneArgs, FleetArgs, GcpArgs
from components.cluster import InferenceCluster, InferenceClusterArgs
from components.deployment import ModelDeployment
from components.cache import ModelCache
from components.fleet import FleetResources, deploy_fleet
from components.gateway import TraefikGateway
from components.serving import ServingStack
from components.service import ModelEndpoint, ModelService

__all__ = [
    "AwsArgs", "ClusterAccess", "ControlPlaneArgs", "FleetArgs", "FleetResources", "GcpArgs",
    "InferenceCluster", "InferenceClusterArgs", "ModelCache", "ModelDeployment", "ModelEndpoint",
    "ModelService", "ServingStack", "TraefikGateway", "deploy_fleet",
]
