"""Cloud node pools a user can still declare wrong: EFA the pods cannot use, GKE pools whose
size GKE cannot express, GKE GPUDirect the program does not wire (issue 12; the rules live in
modelplane.clouds, which the EKS/GKE sources and the renderers call too)."""

from __future__ import annotations

from collections.abc import Iterable

from modelplane.api import NodePool
from modelplane.clouds.aws import EFA_INTERFACES, EFA_RESOURCE, member_efa_share, pool_efa_interfaces
from modelplane.clouds.gcp import gke_pool_size, gpu_networking

from .context import CheckContext
from .findings import ADVISORY, MANDATORY, Finding
from .registry import register

POLICY_EFA = "efa-exposure"
POLICY_GKE_SIZE = "gke-pool-size"
POLICY_GKE_GPUDIRECT = "gke-gpudirect"


def _gke_machine(ctx: CheckContext, pool: NodePool) -> str | None:
    klass = ctx.fleet.classes.get(pool.class_name or "")
    prov = klass.spec.provisioning if klass is not None else None
    return prov.gke.machine_type if prov is not None and prov.gke is not None else None


@register(POLICY_EFA, MANDATORY, "Pods on an EFA pool must get EFA devices (vpc.amazonaws.com/efa), or "
          "their GPU-to-GPU traffic runs over TCP")
def check_efa(ctx: CheckContext) -> Iterable[Finding]:
    for cluster in ctx.fleet.clusters.values():
        for i, pool in enumerate(cluster.spec.node_pools):
            if pool.fabric.type != "EFA" or pool_efa_interfaces(ctx.fleet, pool) is not None:
                continue
            share = member_efa_share(ctx.fleet, cluster, pool, 1)
            yield Finding(
                POLICY_EFA, MANDATORY, ctx.ref(cluster), f"spec.nodePools[{i}].fabric.type",
                f"{share.reason if share else 'EFA device count unknown'}: no pod placed there is given EFA "
                f"devices ({EFA_RESOURCE}), so NCCL and NIXL fall back to TCP while the pool claims EFA. Fix: "
                f"give class {pool.class_name} a provisioning.eks.instanceType with EFA "
                f"({', '.join(sorted(EFA_INTERFACES))}), or set fabric.type: None.")


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
