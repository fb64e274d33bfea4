"""AWS facts: EFA interfaces per instance type and what pods must request to use them.

EFA devices reach pods only through a device plugin or DRA driver: the EFA device plugin
publishes each EFA interface as one `vpc.amazonaws.com/efa` extended resource, and a pod
gets EFA devices only by requesting them ("Manage EFA devices on Amazon EKS",
https://docs.aws.amazon.com/eks/latest/userguide/device-management-efa.html). A gang on an
EFA pool whose pods request none runs NCCL over TCP.
"""

from __future__ import annotations

from dataclasses import dataclass

from modelplane.api import Fleet, InferenceCluster, NodePool

EFA_RESOURCE = "vpc.amazonaws.com/efa"
# The system node group's instance type unless the stack sets aws.systemInstanceType.
SYSTEM_INSTANCE_TYPE = "m6i.xlarge"
# EFA-capable network cards per instance type: one EFA interface per card (EC2 user guide,
# "Maximize network bandwidth on EC2 instances with multiple network cards";
# k8s-api-shapes.md §9.1: 32 on p5.48xlarge, 16 on p5en, 4 on p4d).
EFA_INTERFACES: dict[str, int] = {
    "p5.48xlarge": 32, "p5e.48xlarge": 32, "p5en.48xlarge": 16, "p4d.24xlarge": 4,
    "p4de.24xlarge": 4, "p6-b200.48xlarge": 8, "g6e.48xlarge": 4,
}


def pool_instance_type(fleet: Fleet, pool: NodePool) -> str | None:
    """The EC2 instance type of a pool's nodes, from its class's provisioning.eks block."""
    klass = fleet.classes.get(pool.class_name or "")
    prov = klass.spec.provisioning if klass is not None else None
    return prov.eks.instance_type if prov is not None and prov.eks is not None else None


def pool_efa_interfaces(fleet: Fleet, pool: NodePool) -> int | None:
    """EFA interfaces each node of an EFA pool has; None when the pool is not EFA or its
    instance type is not one we know to carry EFA (the pods then cannot be given any)."""
    if pool.fabric.type != "EFA":
        return None
    instance = pool_instance_type(fleet, pool)
    return EFA_INTERFACES.get(instance) if instance else None


def _devices_per_node(fleet: Fleet, pool: NodePool) -> int:
    klass = fleet.classes.get(pool.class_name or "")
    return sum(d.count for d in klass.spec.devices if d.claim == "DRA") if klass is not None else 0


@dataclass(frozen=True)
class EfaShare:
    """EFA devices one pod of a member requests, or why it gets none."""

    devices: int
    reason: str | None = None      # set when devices == 0 on an EFA pool


def member_efa_share(fleet: Fleet, cluster: InferenceCluster, pool: NodePool, claimed: int) -> EfaShare | None:
    """`vpc.amazonaws.com/efa` per pod for a member claiming `claimed` DRA devices on `pool`:
    the node's EFA interfaces in proportion to the devices claimed (all of them for a whole
    node). None when the pool is not EFA. Device plugins hand out whole interfaces, one pod
    each, so proportional shares keep the other pods on the node schedulable."""
    if pool.fabric.type != "EFA":
        return None
    if claimed <= 0:
        return EfaShare(0, "the member claims no GPU, so it takes no part in GPU-to-GPU traffic")
    interfaces = pool_efa_interfaces(fleet, pool)
    if interfaces is None:
        instance = pool_instance_type(fleet, pool)
        what = (f"instance type {instance!r} is not one known to carry EFA ({', '.join(sorted(EFA_INTERFACES))})"
                if instance else "its class has no provisioning.eks.instanceType")
        return EfaShare(0, f"pool {pool.name!r} of InferenceCluster {cluster.metadata.name} declares EFA but "
                           f"{what}, so the number of EFA devices its nodes carry is unknown")
    per_node = _devices_per_node(fleet, pool)
    share = interfaces if per_node <= 0 or claimed >= per_node else max(1, interfaces * claimed // per_node)
    return EfaShare(share)
