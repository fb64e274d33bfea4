"""GCP facts: GPU networking per GKE machine family and node counts per zone.

* A3 High (`a3-highgpu-*`) uses GPUDirect-TCPX over 4 extra gVNIC VPCs and A3 Mega
  (`a3-megagpu-*`) GPUDirect-TCPXO over 8; only A3 Ultra (`a3-ultragpu-*`), A4
  (`a4-highgpu-*`) and A4X (`a4x-*`) use GPUDirect RDMA over RoCE VPCs
  (GoogleCloudPlatform/container-engine-accelerators gpudirect-tcpx/, gpudirect-tcpxo/,
  gpudirect-rdma/; k8s-api-shapes.md §9.2). An RDMA VPC on an A3 High/Mega pool gives its
  NICs nothing they can use.
* A GKE node pool's `node_count` and per-zone autoscaling limits count nodes *per zone*;
  only `total_min_node_count`/`total_max_node_count` count the whole pool
  (google_container_node_pool: "node_count - The number of nodes per instance group",
  autoscaling "total_max_node_count - Maximum number of all nodes in the node pool",
  as the provider's docs in pulumi_gcp/container/node_pool.py state).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from modelplane.api import NodePool

GpuNetworking = Literal["TCPX", "TCPXO", "RDMA"]
# The system node pool's machine type unless the stack sets gcp.systemMachineType.
SYSTEM_MACHINE_TYPE = "e2-standard-4"
# (machine-type prefix, networking, extra NICs per node)
MACHINE_NETWORKING: tuple[tuple[str, GpuNetworking, int], ...] = (
    ("a3-highgpu-", "TCPX", 4),
    ("a3-megagpu-", "TCPXO", 8),
    ("a3-ultragpu-", "RDMA", 8),
    ("a4-highgpu-", "RDMA", 8),
    ("a4x-", "RDMA", 4),
)


def gpu_networking(machine_type: str) -> tuple[GpuNetworking, int] | None:
    """The GPU-to-GPU network a machine type uses across nodes, and its extra NICs."""
    for prefix, kind, nics in MACHINE_NETWORKING:
        if machine_type.startswith(prefix):
            return kind, nics
    return None


@dataclass(frozen=True)
class GkePoolSize:
    """How a fleet pool's size is spelled on a GKE node pool spanning `zones` zones."""

    zones: int
    node_count: int | None = None           # fixed size, per zone
    initial_node_count: int | None = None   # autoscaled: per zone, at creation
    total_min: int | None = None            # autoscaled: the whole pool
    total_max: int | None = None

    @property
    def nodes(self) -> int:
        """Nodes the pool runs (fixed) or may run (autoscaled): what the scheduler counts."""
        return self.total_max if self.total_max is not None else (self.node_count or 0) * self.zones


def gke_pool_size(pool: NodePool) -> GkePoolSize:
    """The node pool sizing that gives exactly the nodes the fleet scheduler counts
    (`NodePool.declared_nodes`); ValueError with the fix when GKE cannot express it."""
    zones = len(pool.zones)
    if zones == 0:
        raise ValueError("GKE GPU pools need spec.nodePools[].zones: GPUs exist in some zones only, and "
                         "without zones GKE spreads the pool over every zone of the region, per zone")
    if pool.max_node_count:
        low = pool.min_node_count if pool.min_node_count is not None else 0
        if pool.node_count % zones:
            raise ValueError(f"nodeCount {pool.node_count} is the pool's starting size, which GKE sets per zone: "
                             f"it must be a multiple of its {zones} zones (or list one zone)")
        return GkePoolSize(zones, initial_node_count=pool.node_count // zones, total_min=low,
                           total_max=pool.max_node_count)
    if pool.node_count % zones:
        raise ValueError(f"nodeCount {pool.node_count} cannot be spread evenly over {zones} zones and GKE "
                         f"sets a fixed pool's size per zone; list one zone, make nodeCount a multiple of "
                         f"{zones}, or set maxNodeCount for an autoscaled pool")
    return GkePoolSize(zones, node_count=pool.node_count // zones)
