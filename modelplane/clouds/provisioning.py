"""What a provisioned pool is built from: the `provisioning.<cloud>` block of its InferenceClass.

The EKS source builds a GPU node group from `provisioning.eks` (instance type, accelerator), the
GKE source a node pool from `provisioning.gke` (machine type, accelerator); a class without the
block cannot be provisioned there. One rule for the sources (which refuse the pool at preview)
and the `cloud-pool-provisioning` check (which says so at `lint`)."""

from __future__ import annotations

from modelplane.api import Fleet, InferenceCluster, NodePool
from modelplane.api.inference_class import EksProvisioning, GkeProvisioning
from modelplane.clouds.aws import node_group_scaling

# The block each provisioned source reads, and what the source takes from it.
PROVISIONING_BLOCKS: dict[str, tuple[str, str]] = {
    "EKS": ("eks", "instanceType, accelerator"),
    "GKE": ("gke", "machineType, accelerator"),
}


def pool_provisioning_block(fleet: Fleet, cluster: InferenceCluster, pool: NodePool
                            ) -> EksProvisioning | GkeProvisioning | None:
    """The class's `provisioning.<block>` for a GPU pool of an EKS/GKE cluster, or None when it
    has none (or the source provisions nothing)."""
    block = PROVISIONING_BLOCKS.get(cluster.source)
    klass = fleet.classes.get(pool.class_name or "")
    if block is None or klass is None or klass.spec.provisioning is None:
        return None
    found: EksProvisioning | GkeProvisioning | None = getattr(klass.spec.provisioning, block[0])
    return found


def provisioning_problem(fleet: Fleet, cluster: InferenceCluster, pool: NodePool) -> str | None:
    """Why an EKS/GKE GPU pool cannot be provisioned from its class, or None."""
    block = PROVISIONING_BLOCKS.get(cluster.source)
    if block is None or not pool.is_gpu_pool or pool_provisioning_block(fleet, cluster, pool) is not None:
        return None
    return (f"InferenceCluster {cluster.metadata.name} pool {pool.name}: class {pool.class_name} has no "
            f"provisioning.{block[0]} block ({block[1]})")


def autoscaled_pool(cluster: InferenceCluster, pool: NodePool) -> bool:
    """A cluster-autoscaler resizes the pool's nodes, scale-down included: on EKS the one the
    serving stack installs for pools that can grow (InferenceCluster.autoscaled_pools), on
    GKE GKE's own for a pool with maxNodeCount (components/sources/gke.py sets its autoscaling
    limits, modelplane.clouds.gcp.gke_pool_size). Fixed pools and other sources: none we run."""
    if cluster.source == "EKS":
        return node_group_scaling(pool).autoscaled and pool.is_gpu_pool
    if cluster.source == "GKE":
        return bool(pool.max_node_count) and pool.is_gpu_pool
    return False
