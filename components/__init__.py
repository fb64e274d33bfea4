"""Pulumi components of the Modelplane fleet (type tokens `modelplane:index:<Type>`).

Importing this package registers nothing; `deploy_fleet` (the `ModelplaneFleet` root
component) does, from `FleetArgs`.
"""

from components.args import AwsArgs, ClusterAccess, ControlPlaneArgs, FleetArgs, GcpArgs
from components.cache import ModelCache, ModelCacheArgs
from components.cluster import InferenceCluster, InferenceClusterArgs
from components.deployment import ModelDeployment, ModelDeploymentArgs
from components.errors import ResourceError
from components.fleet import ModelplaneFleet, deploy_fleet
from components.gateway import TraefikGateway, TraefikGatewayArgs
from components.service import ModelEndpoint, ModelEndpointArgs, ModelService, ModelServiceArgs
from components.serving import ServingStack, ServingStackArgs

__all__ = [
    "AwsArgs", "ClusterAccess", "ControlPlaneArgs", "FleetArgs", "GcpArgs", "InferenceCluster",
    "InferenceClusterArgs", "ModelCache", "ModelCacheArgs", "ModelDeployment", "ModelDeploymentArgs",
    "ModelEndpoint", "ModelEndpointArgs", "ModelService", "ModelServiceArgs", "ModelplaneFleet", "ResourceError",
    "ServingStack", "ServingStackArgs", "TraefikGateway", "TraefikGatewayArgs", "deploy_fleet",
]
