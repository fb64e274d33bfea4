"""One cluster plan: fleet + placement -> what every cluster runs, shared by the Pulumi
components, `modelplane render` and `demo` (docs/design.md)."""

from .build import (
    DEFAULT_CONTROL_PLANE,
    ControlPlane,
    PlanError,
    cache_clusters,
    control_plane_cluster,
    fleet_routes_for,
    gitops_gateway_urls,
    plan_cluster,
    plan_control,
    plan_fleet,
    plan_foundation,
)
from .types import CachePlan, ClusterFoundation, ClusterPlan, ControlPlan, FleetPlan, ReplicaPlan, SecretNeed

__all__ = [
    "DEFAULT_CONTROL_PLANE", "CachePlan", "ClusterFoundation", "ClusterPlan", "ControlPlan", "ControlPlane",
    "FleetPlan", "PlanError", "ReplicaPlan", "SecretNeed", "cache_clusters", "control_plane_cluster",
    "fleet_routes_for", "gitops_gateway_urls", "plan_cluster", "plan_control", "plan_foundation", "plan_fleet",
]
