"""Cloud node pools a user can still declare wrong: EFA the pods of a gang or NIXL pair cannot
use, EKS/GKE pools whose class has no provisioning block, DRA EFA devices naming a DeviceClass
nothing creates, GKE pools whose size GKE cannot express, GKE GPUDirect the program does not
wire (the rules live in modelplane.clouds, which the EKS/GKE sources and the renderers call too)."""

from __future__ import annotations

from collections.abc import Iterable

from modelplane.api import InferenceCluster, ModelDeployment, NodePool
from modelplane.clouds.aws import (
    EFA_DEVICE_CLASS,
    EFA_RESOURCE,
    efa_instance_types,
    efa_mode,
    member_efa_share,
    node_group_scaling,
)
from modelplane.clouds.gcp import gke_pool_size, gpu_networking
from modelplane.clouds.provisioning import PROVISIONING_BLOCKS, provisioning_problem
from modelplane.scheduler import ResolvedRequest
from modelplane.vocabulary import DRANET_DRIVER

from .context import CheckContext
from .findings import ADVISORY, MANDATORY, Finding
from .registry import register

POLICY_EFA = "efa-exposure"
POLICY_PROVISIONING = "cloud-pool-provisioning"
POLICY_EFA_DEVICE_CLASS = "efa-dra-device-class"
POLICY_SCALE_FROM_ZERO = "eks-autoscale-from-zero"
POLICY_GKE_SIZE = "gke-pool-size"
POLICY_GKE_GPUDIRECT = "gke-gpudirect"


def _gke_machine(ctx: CheckContext, pool: NodePool) -> str | None:
    klass = ctx.fleet.classes.get(pool.class_name or "")
    prov = klass.spec.provisioning if klass is not None else None
    return prov.gke.machine_type if prov is not None and prov.gke is not None else None


def _crossing_members(ctx: CheckContext) -> Iterable[tuple[ModelDeployment, int, int, str, InferenceCluster, NodePool,
                                                           tuple[ResolvedRequest, ...]]]:
    """(deployment, engine index, member index, replica, cluster, pool, resolved requests) for every
    placed member whose GPU traffic leaves its node: a multi-node gang's, or a NIXL pair's."""
    if ctx.placement is None:
        return
    for placed in ctx.placement.deployments:
        dep = ctx.fleet.deployments.get((placed.namespace, placed.name))
        if dep is None:
            continue
        pd = dep.spec.template.spec.mode == "PrefillDecode"
        for replica in placed.replicas:
            cluster = ctx.fleet.clusters.get(replica.cluster)
            where_all = replica.engines
            for e, engine in enumerate(dep.spec.template.spec.engines):
                where = where_all.get(engine.name)
                if cluster is None or where is None or not (len(engine.members) > 1 or (pd and engine.phase)):
                    continue
                pools = where.pools_for(len(engine.members))
                for m, pool_name in enumerate(pools):
                    pool = cluster.pool(pool_name)
                    requests = where.requests[m] if len(where.requests) == len(engine.members) else ()
                    if pool is not None:
                        yield dep, e, m, replica.name, cluster, pool, tuple(requests)


@register(POLICY_EFA, ADVISORY, "Pods of multi-node gangs and NIXL pairs on an EFA pool must get EFA devices, "
          "or their GPU-to-GPU traffic runs over TCP", needs_placement=True)
def check_efa(ctx: CheckContext) -> Iterable[Finding]:
    seen: set[tuple[str, int, int, str, str]] = set()
    for dep, e, m, replica, cluster, pool, requests in _crossing_members(ctx):
        mode = efa_mode(ctx.fleet, pool)
        key = (ctx.ref(dep), e, m, cluster.metadata.name, pool.name)
        if mode is None or key in seen:
            continue
        seen.add(key)
        field = f"spec.template.spec.engines[{e}].members[{m}]"
        where = f"replica {replica!r} on pool {pool.name!r} of InferenceCluster/{cluster.metadata.name}"
        if mode == "dra":
            klass = ctx.fleet.classes[pool.class_name or ""]
            efa = {d.device_class_name or d.driver for d in klass.spec.devices if d.driver == DRANET_DRIVER}
            if any(q.device_class_name in efa for q in requests):
                continue
            yield Finding(
                POLICY_EFA, ADVISORY, ctx.ref(dep), f"{field}.nodeSelector.devices", f"{where}: class "
                f"{klass.metadata.name} claims EFA through DRA ({DRANET_DRIVER}), but this member's nodeSelector "
                "requests no EFA device, so its pods get none and NCCL/NIXL between nodes run over TCP. Fix: add a "
                f"device request for the class's {DRANET_DRIVER} devices (e.g. as many as the GPUs it claims).")
            continue
        share = member_efa_share(ctx.fleet, cluster, pool, 1)
        if share is None or share.devices:
            continue
        yield Finding(
            POLICY_EFA, ADVISORY, ctx.ref(dep), field,
            f"{where}: {share.reason}: its pods are given no EFA devices ({EFA_RESOURCE}), so NCCL and NIXL between "
            f"nodes fall back to TCP while the pool claims EFA. Fix: give class {pool.class_name} a "
            f"provisioning.eks.instanceType with EFA ({efa_instance_types()}), claim EFA through DRA "
            f"({DRANET_DRIVER} devices), or set fabric.type: None.")


@register(POLICY_PROVISIONING, MANDATORY, "An EKS or GKE GPU pool's class needs the provisioning block the "
          "program builds the pool's nodes from")
def check_provisioning(ctx: CheckContext) -> Iterable[Finding]:
    for cluster in ctx.fleet.clusters.values():
        for i, pool in enumerate(cluster.spec.node_pools):
            problem = provisioning_problem(ctx.fleet, cluster, pool)
            if problem is None:
                continue
            block = PROVISIONING_BLOCKS[cluster.source][0]
            yield Finding(POLICY_PROVISIONING, MANDATORY, ctx.ref(cluster), f"spec.nodePools[{i}].className",
                          f"{problem}, so `pulumi up` cannot create the pool's nodes. Fix: add "
                          f"spec.provisioning {{provider: {cluster.source}, {block}: {{...}}}} to InferenceClass "
                          f"{pool.class_name}, or run the pool on a cluster of source Existing.")


@register(POLICY_EFA_DEVICE_CLASS, MANDATORY, f"{DRANET_DRIVER} EFA devices must name the DeviceClass aws-dranet "
          f"creates ({EFA_DEVICE_CLASS})")
def check_efa_device_class(ctx: CheckContext) -> Iterable[Finding]:
    for klass in ctx.fleet.classes.values():
        for d, device in enumerate(klass.spec.devices):
            if device.claim != "DRA" or device.driver != DRANET_DRIVER:
                continue
            name = device.device_class_name or device.driver
            if name != EFA_DEVICE_CLASS:
                yield Finding(POLICY_EFA_DEVICE_CLASS, MANDATORY, ctx.ref(klass), f"spec.devices[{d}].deviceClassName",
                              f"device {device.name!r} is claimed from DeviceClass {name!r}, but the aws-dranet chart "
                              f"the program installs for {DRANET_DRIVER} creates {EFA_DEVICE_CLASS!r} only, so its "
                              f"claims never allocate. Fix: deviceClassName: {EFA_DEVICE_CLASS}.")


def _autoscaled_minimums(cluster: InferenceCluster) -> Iterable[tuple[NodePool, int, str]]:
    """(pool, the fewest nodes it may shrink to, who resizes it) for every GPU pool an autoscaler
    resizes: the cluster-autoscaler on EKS (min = minNodeCount, else nodeCount), GKE's own on GKE
    (total_min_node_count = minNodeCount, else 0: modelplane.clouds.gcp.gke_pool_size)."""
    if cluster.source == "EKS":
        for pool in cluster.autoscaled_pools:
            yield pool, node_group_scaling(pool).min_size, "the cluster-autoscaler"
    elif cluster.source == "GKE":
        for pool in cluster.gpu_pools:
            if not pool.max_node_count:
                continue
            try:
                size = gke_pool_size(pool)
            except ValueError:
                continue        # gke-pool-size reports it
            if size.total_min is not None:
                yield pool, size.total_min, "GKE's cluster autoscaler"


@register(POLICY_SCALE_FROM_ZERO, ADVISORY, "The cluster-autoscaler cannot grow an EKS or GKE DRA pool from zero "
          "nodes: keep minNodeCount at 1 or more")
def check_scale_from_zero(ctx: CheckContext) -> Iterable[Finding]:
    """kubernetes/autoscaler cluster-autoscaler/cloudprovider/aws/README.md: at zero nodes the
    autoscaler builds the group's node from its tags and the EKS DescribeNodegroup API, which say
    nothing of the DRA devices a driver would publish; the reference tracks the same limit
    (modelplane issue #345, "keep minNodeCount >= 1"). On GKE the same: cloudprovider/gce/
    gce_cloud_provider.go `TemplateNodeInfo` builds the template node from the MIG's instance
    template and passes no ResourceSlices (`framework.NewNodeInfo(node, nil, ...)`, as
    aws_cloud_provider.go does), and a GKE pool's minimum defaults to 0 (issue 27 item 7). The
    policy keeps its first name so existing configs still address it."""
    for cluster in ctx.fleet.clusters.values():
        for pool, low, who in _autoscaled_minimums(cluster):
            klass = ctx.fleet.classes.get(pool.class_name or "")
            if low > 0 or klass is None or not any(d.claim == "DRA" for d in klass.spec.devices):
                continue
            i = cluster.spec.node_pools.index(pool)
            default = " (unset on GKE means 0)" if cluster.source == "GKE" and pool.min_node_count is None else ""
            yield Finding(POLICY_SCALE_FROM_ZERO, ADVISORY, ctx.ref(cluster), f"spec.nodePools[{i}].minNodeCount",
                          f"pool {pool.name!r} may shrink to zero nodes{default}, and from zero {who} cannot see "
                          f"the DRA devices class {klass.metadata.name}'s nodes publish, so replicas placed there "
                          "stay Pending instead of growing it. Fix: minNodeCount: 1 (or more).")


@register(POLICY_GKE_SIZE, MANDATORY, "A GKE pool's node count must be expressible per zone, so it holds "
          "exactly the nodes the scheduler counts")
def check_gke_size(ctx: CheckContext) -> Iterable[Finding]:
    for cluster in ctx.fleet.clusters.values():
        if cluster.source != "GKE":
            continue
        for i, pool in enumerate(cluster.spec.node_pools):
            if not pool.is_gpu_pool:
                continue
            try:
                gke_pool_size(pool)
            except ValueError as exc:
                yield Finding(POLICY_GKE_SIZE, MANDATORY, ctx.ref(cluster), f"spec.nodePools[{i}]",
                              f"pool {pool.name!r}: {exc}.")


@register(POLICY_GKE_GPUDIRECT, ADVISORY, "GKE GPUDirect (TCPX/TCPXO/RDMA) is not wired into pods by this "
          "program: gangs on such pools use the primary NIC")
def check_gke_gpudirect(ctx: CheckContext) -> Iterable[Finding]:
    for cluster in ctx.fleet.clusters.values():
        if cluster.source != "GKE":
            continue
        for i, pool in enumerate(cluster.spec.node_pools):
            machine = _gke_machine(ctx, pool)
            networking = gpu_networking(machine) if machine else None
            if not pool.fabric.domain or networking is None:
                continue
            kind, nics = networking
            what = ("GPUDirect-TCPX" if kind == "TCPX" else "GPUDirect-TCPXO" if kind == "TCPXO"
                    else "GPUDirect RDMA over RoCE")
            node_side = ("no extra VPCs are attached (RDMA VPCs would be useless on these NICs)" if kind != "RDMA"
                         else "RDMA VPCs are attached when the stack config names gcp.rdmaNetworkProfile")
            yield Finding(
                POLICY_GKE_GPUDIRECT, ADVISORY, ctx.ref(cluster), f"spec.nodePools[{i}].fabric.domain",
                f"pool {pool.name!r} ({machine}) declares fabric domain {pool.fabric.domain!r}; its machines use "
                f"{what} over {nics} extra NICs. The pool gets COMPACT placement and {node_side}, but the pod side "
                "(interface annotations, the NCCL plugin installer, RxDM sidecars for TCPX/TCPXO) is not rendered, "
                "so NCCL traffic between nodes uses the primary NIC. Fix: add that wiring to the engine pod "
                "template and the cluster, or do not count on the fabric for cross-node tensor parallelism.")
