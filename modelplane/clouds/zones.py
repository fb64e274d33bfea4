"""How a pool's nodes spread over zones, as far as the program knows it: the one rule the
scheduler charges gangs by (modelplane.scheduler.plugins.gang_zones: a gang copy's nodes come
from one zone) and the renderers pin a gang to (modelplane.clouds.nodes.ZONE_LABEL).

* EKS: a managed node group's Auto Scaling group spreads its instances evenly over its subnets'
  Availability Zones ("Amazon EC2 Auto Scaling ... attempts to distribute instances evenly
  between the Availability Zones that are enabled for your Auto Scaling group", EC2 Auto Scaling
  user guide, "Availability Zone rebalancing"); ours span the pool's zones, else the cluster's
  (modelplane.clouds.aws.eks_pool_zones). When the count does not divide, AWS picks the zones
  that get one more, so each zone is sure of `nodes // zones` only.
* GKE: a fixed pool's `node_count` is per zone ("the number of nodes to create in each
  location", GKE "Autoscaling a cluster"; google_container_node_pool `node_count`), so each
  zone holds nodeCount / zones (modelplane.clouds.gcp). An autoscaled pool gets total limits
  (`total_min/max_node_count`, "Cannot be used with per zone limits"; the per-zone
  `min/max_node_count` are not set) with location policy ANY, so no zone is capped below the
  pool's maximum: one zone may hold all of it.
"""

from __future__ import annotations

from modelplane.api import InferenceCluster, NodePool

from .aws import eks_pool_zones


def pool_zones(cluster: InferenceCluster, pool: NodePool) -> list[str]:
    """The zones a provisioned pool's nodes live in, each once; empty where the program does
    not know (Kind and Existing clusters, other sources)."""
    if cluster.source == "EKS":
        return list(dict.fromkeys(eks_pool_zones(cluster, pool)))
    if cluster.source == "GKE":
        return list(dict.fromkeys(pool.zones))
    return []


def nodes_per_zone(cluster: InferenceCluster, pool: NodePool, nodes: int,
                   zones: list[str] | tuple[str, ...] | None = None) -> int | None:
    """The nodes each zone of the pool is sure to hold when the pool has `nodes` nodes, or None
    when no zone is capped below the whole pool (one zone or none known, or a GKE pool with
    total autoscaling limits). `zones`: the pool's, when the caller has them already."""
    if zones is None:
        zones = pool_zones(cluster, pool)
    if len(zones) < 2:
        return None
    if cluster.source == "GKE" and pool.max_node_count:
        return None
    return max(0, nodes) // len(zones)
