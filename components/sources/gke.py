"""GKE: the control plane (with the Filestore CSI driver for caches), a system pool and one
GPU node pool per fleet pool.

Rules this follows (contract tests in tests/pulumi/test_cloud_contracts.py):

* DRA GPU pools disable GKE's automatic driver installation and carry
  `gke-no-default-nvidia-gpu-device-plugin=true` ("Prepare GKE infrastructure for DRA
  workloads"); the driver is installed by the serving stack's DaemonSet and the pools also
  carry `nvidia.com/gpu.present=true`, which the NVIDIA DRA kubelet plugin's node affinity
  requires (modelplane.clouds.nodes).
* Node counts are per zone on GKE; pools are sized so the pool holds exactly the nodes the
  fleet scheduler counted (modelplane.clouds.gcp.gke_pool_size).
* RDMA (RoCE) VPCs only for machine families that use them (A3 Ultra, A4, A4X); A3 High and
  Mega use GPUDirect-TCPX/TCPXO, whose pod wiring this program does not render, so their
  pools get COMPACT placement only and the preview says so.
"""

from __future__ import annotations

import json

import pulumi
import pulumi_gcp as gcp

from components.args import GcpArgs
from components.errors import ResourceError
from components.labels import gcp_labels
from components.sources import ProvisionedCluster, pool_provisioning
from modelplane.api import Fleet, InferenceCluster, NodePool
from modelplane.clouds.gcp import GkePoolSize, gke_pool_size, gpu_networking
from modelplane.clouds.nodes import (
    SYSTEM_POOL_LABELS,
    SYSTEM_POOL_MAX_NODES,
    SYSTEM_POOL_NODES,
    provisioned_node_labels,
)
from modelplane.clouds.nvidia import uses_nvidia_dra
from modelplane.render.storage_class import storage_class_manifest


def kubeconfig(cluster: gcp.container.Cluster) -> pulumi.Output[str]:
    def build(args: list[str]) -> str:
        name, endpoint, ca = args
        return json.dumps({
            "apiVersion": "v1", "kind": "Config", "current-context": name,
            "clusters": [{"name": name, "cluster": {"server": f"https://{endpoint}",
                                                     "certificate-authority-data": ca}}],
            "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
            "users": [{"name": name, "user": {"exec": {
                "apiVersion": "client.authentication.k8s.io/v1beta1",
                "command": "gke-gcloud-auth-plugin", "provideClusterInfo": True}}}],
        })
    return pulumi.Output.secret(pulumi.Output.all(cluster.name, cluster.endpoint,
                                                  cluster.master_auth.cluster_ca_certificate).apply(build))


def _interconnect(pool: NodePool) -> bool:
    return bool(pool.fabric.domain) or pool.fabric.type != "None"


def _rdma_pool(pool: NodePool, machine_type: str, settings: GcpArgs) -> bool:
    """Whether the pool gets RDMA VPCs: it asks for an interconnect, the stack names a RoCE
    network profile, and its machines use GPUDirect RDMA (not TCPX/TCPXO)."""
    networking = gpu_networking(machine_type)
    return (_interconnect(pool) and bool(settings.rdma_network_profile)
            and networking is not None and networking[0] == "RDMA")


def _sizes(name: str, spec: InferenceCluster, fleet: Fleet, parent: pulumi.Resource) -> dict[str, GkePoolSize]:
    sizes = {}
    for pool in spec.gpu_pools:
        try:
            sizes[pool.name] = gke_pool_size(pool)
        except ValueError as exc:
            raise ResourceError(f"{fleet.source_of(spec)}: InferenceCluster {name} pool {pool.name}: {exc}",
                                parent) from None
    return sizes


def gke_cluster(name: str, spec: InferenceCluster, fleet: Fleet, settings: GcpArgs,
                parent: pulumi.Resource) -> ProvisionedCluster:
    source = spec.spec.cluster.gke
    if source is None:
        raise ResourceError(f"InferenceCluster {name}: source GKE needs spec.cluster.gke", parent)
    sizes = _sizes(name, spec, fleet, parent)
    opts = pulumi.ResourceOptions(parent=parent)
    pools = spec.gpu_pools
    machines = {p.name: pool_provisioning(spec, p, fleet, parent).machine_type
                for p in pools}
    rdma = any(_rdma_pool(p, machines[p.name], settings) for p in pools)
    cluster = gcp.container.Cluster(
        name, location=source.region, project=settings.project, network=settings.network,
        subnetwork=settings.subnetwork, remove_default_node_pool=True, initial_node_count=1,
        deletion_protection=False, min_master_version=source.kubernetes_version or None,
        release_channel=gcp.container.ClusterReleaseChannelArgs(channel="REGULAR"),
        datapath_provider="ADVANCED_DATAPATH" if rdma else None,
        enable_multi_networking=True if rdma else None,
        addons_config=gcp.container.ClusterAddonsConfigArgs(
            gcp_filestore_csi_driver_config=gcp.container.ClusterAddonsConfigGcpFilestoreCsiDriverConfigArgs(
                enabled=True)),
        resource_labels=gcp_labels(name), opts=opts)
    # One zone for the system pool (a regional pool would run its count in every zone).
    system_zone = next((p.zones[0] for p in pools if p.zones), None)
    gcp.container.NodePool(
        f"{name}-system", cluster=cluster.name, location=source.region, project=settings.project,
        node_locations=[system_zone] if system_zone else None, initial_node_count=SYSTEM_POOL_NODES,
        autoscaling=gcp.container.NodePoolAutoscalingArgs(total_min_node_count=SYSTEM_POOL_NODES,
                                                          total_max_node_count=SYSTEM_POOL_MAX_NODES),
        node_config=gcp.container.NodePoolNodeConfigArgs(
            machine_type=settings.system_machine_type, labels=dict(SYSTEM_POOL_LABELS),
            resource_labels=gcp_labels(name)),
        opts=opts)
    for pool in pools:
        machine = machines[pool.name]
        networking = gpu_networking(machine)
        if _interconnect(pool) and networking is not None and networking[0] != "RDMA":
            pulumi.log.warn(f"InferenceCluster {name} pool {pool.name}: {machine} uses GPUDirect-{networking[0]} "
                            f"({networking[1]} extra NICs), whose per-pod wiring (RxDM sidecar, NCCL plugin) this "
                            "program does not render: the pool gets COMPACT placement only and gangs use the "
                            "primary NIC", parent)
        _gpu_pool(name, pool, fleet, spec, cluster, source.region, settings, sizes[pool.name], opts,
                  rdma=_rdma_pool(pool, machine, settings))
    return ProvisionedCluster(kubeconfig(cluster),
                              storage_class_manifest("GKE", network=settings.network or "default"))


def _rdma_network_config(name: str, pool: NodePool, settings: GcpArgs,
                         opts: pulumi.ResourceOptions) -> gcp.container.NodePoolNetworkConfigArgs:
    network = gcp.compute.Network(f"{name}-{pool.name}-rdma", project=settings.project,
                                  auto_create_subnetworks=False,
                                  network_profile=settings.rdma_network_profile, opts=opts)
    region = pool.zones[0].rsplit("-", 1)[0] if pool.zones else None
    configs = []
    for nic in range(settings.rdma_nics):
        subnet = gcp.compute.Subnetwork(f"{name}-{pool.name}-rdma-{nic}", project=settings.project,
                                        network=network.id, region=region,
                                        ip_cidr_range=f"192.168.{nic}.0/24", opts=opts)
        configs.append(gcp.container.NodePoolNetworkConfigAdditionalNodeNetworkConfigArgs(
            network=network.name, subnetwork=subnet.name))
    return gcp.container.NodePoolNetworkConfigArgs(additional_node_network_configs=configs)


def _gpu_pool(name: str, pool: NodePool, fleet: Fleet, spec: InferenceCluster, cluster: gcp.container.Cluster,
              region: str, settings: GcpArgs, size: GkePoolSize, opts: pulumi.ResourceOptions, *,
              rdma: bool) -> gcp.container.NodePool:
    prov = pool_provisioning(spec, pool, fleet, opts.parent)
    autoscaling = None
    if size.total_max is not None:
        autoscaling = gcp.container.NodePoolAutoscalingArgs(
            total_min_node_count=size.total_min, total_max_node_count=size.total_max, location_policy="ANY")
    # DRA: GKE must neither install the driver nor run its device plugin (set-up-dra).
    driver = "INSTALLATION_DISABLED" if uses_nvidia_dra(fleet, pool) else "LATEST"
    return gcp.container.NodePool(
        f"{name}-{pool.name}", cluster=cluster.name, location=region, project=settings.project,
        node_locations=pool.zones, node_count=size.node_count, initial_node_count=size.initial_node_count,
        autoscaling=autoscaling,
        placement_policy=gcp.container.NodePoolPlacementPolicyArgs(type="COMPACT") if _interconnect(pool) else None,
        network_config=_rdma_network_config(name, pool, settings, opts) if rdma else None,
        node_config=gcp.container.NodePoolNodeConfigArgs(
            machine_type=prov.machine_type, disk_size_gb=prov.disk_size_gb,
            guest_accelerators=[gcp.container.NodePoolNodeConfigGuestAcceleratorArgs(
                type=prov.accelerator.type, count=prov.accelerator.count,
                gpu_driver_installation_config=gcp.container.NodePoolNodeConfigGuestAcceleratorGpuDriverInstallationConfigArgs(
                    gpu_driver_version=driver))],
            gvnic=gcp.container.NodePoolNodeConfigGvnicArgs(enabled=True),
            labels=provisioned_node_labels(fleet, spec, pool), resource_labels=gcp_labels(name, pool.name),
            oauth_scopes=["https://www.googleapis.com/auth/cloud-platform"]),
        opts=opts)
