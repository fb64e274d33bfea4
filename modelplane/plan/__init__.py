"""One cluster plan: fleet + placement -> what every cluster runs, shared by the Pulumi
components, `modelplane render` and `demo` (docs/design.md)."""

from .build import (
    DEFAULT_CONTROL_PLANE,
    ControlPlane,
    PlanError,
    cache_clusters,
    cluster_facts,
    control_plane_cluster,
    fleet_routes_for,
    gitops_gateway_urls,
    plan_cluster,
    plan_control,
    plan_fleet,
    plan_foundation,
    plan_with_facts,
)
from .cluster_plan import (
    CachePlan,
    ClusterFacts,
    ClusterFoundation,
    ClusterPlan,
    ControlPlan,
    FleetPlan,
    ReplicaPlan,
    SecretNeed,
)

__all__ = [
    "DEFAULT_CONTROL_PLANE", "CachePlan", "ClusterFacts", "ClusterFoundation", "ClusterPlan", "ControlPlan",
    "ControlPlane", "FleetPlan", "PlanError", "ReplicaPlan", "SecretNeed", "cache_clusters", "cluster_facts",
    "control_plane_cluster", "fleet_routes_for", "gitops_gateway_urls", "plan_cluster", "plan_control",
    "plan_foundation", "plan_fleet", "plan_with_facts",
]
