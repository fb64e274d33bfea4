"""How a pool's nodes spread over zones, as far as the program knows it: the one rule the
renderers (a gang's pods stay in one zone, modelplane.clouds.nodes.gang_zone_affinity) and the
`gang-zone-capacity` check share.

* EKS: a managed node group's Auto Scaling group spreads its instances evenly over its subnets'
  Availability Zones ("Amazon EC2 Auto Scaling ... attempts to distribute instances evenly
  between the Availability Zones that are enabled for your Auto Scaling group", EC2 Auto Scaling
  user guide, "Availability Zone rebalancing"); ours span the pool's zones, else the cluster's
  (modelplane.clouds.aws.eks_pool_zones).
* GKE: a fixed pool holds nodeCount / zones nodes in each zone (modelplane.clouds.gcp); an
  autoscaled one (location policy ANY) may put up to its total maximum in any one zone.
"""

from __future__ import annotations

from math import ceil

from modelplane.api import InferenceCluster, NodePool

from .aws import eks_pool_zones
from .gcp import gke_pool_size


def pool_zones(cluster: InferenceCluster, pool: NodePool) -> list[str]:
    """The zones a provisioned pool's nodes live in; empty where the program does not know."""
    if cluster.source == "EKS":
        return eks_pool_zones(cluster, pool)
    if cluster.source == "GKE":
        return list(pool.zones)
    return []


def most_nodes_in_one_zone(cluster: InferenceCluster, pool: NodePool) -> int | None:
    """The most nodes of the pool one zone can hold (what one gang copy can use at most), or
    None when the pool is in one zone or its spread is unknown."""
    zones = pool_zones(cluster, pool)
    if len(zones) < 2:
        return None
    nodes = pool.declared_nodes
    if cluster.source == "GKE":
        try:
            size = gke_pool_size(pool)
        except ValueError:
            return None              # gke-pool-size reports it
        return size.total_max if size.total_max is not None else size.node_count
    return ceil(nodes / len(zones))
