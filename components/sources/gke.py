"""GKE: the control plane, a system pool and one GPU node pool per fleet pool.

GPU pools carry their accelerators with the driver installed by GKE. A pool that names
a fabric domain asks for an interconnect: it gets COMPACT placement and, when the stack
config names an RDMA network profile, its own RDMA VPC attached as additional node
networks (which needs multi-networking and dataplane v2 on the cluster).
"""

from __future__ import annotations

import json
from typing import Any

import pulumi
import pulumi_gcp as gcp

from components.args import GcpArgs
from components.errors import ResourceError
from components.labels import gcp_labels
from components.sources import pool_provisioning
from modelplane.api import Fleet, InferenceCluster, NodePool
from modelplane.render.meta import LABEL_POOL, LABEL_ROLE


def kubeconfig(cluster: gcp.container.Cluster) -> pulumi.Output[str]:
    def build(args: list[Any]) -> str:
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


def _wants_rdma(pool: NodePool) -> bool:
    return bool(pool.fabric.domain) or pool.fabric.type != "None"


def gke_cluster(name: str, spec: InferenceCluster, fleet: Fleet, settings: GcpArgs,
                parent: pulumi.Resource) -> pulumi.Output[str]:
    source = spec.spec.cluster.gke
    if source is None:
        raise ResourceError(f"InferenceCluster {name}: source GKE needs spec.cluster.gke", parent)
    opts = pulumi.ResourceOptions(parent=parent)
    pools = spec.gpu_pools
    rdma = bool(settings.rdma_network_profile) and any(_wants_rdma(p) for p in pools)
    cluster = gcp.container.Cluster(
        name, location=source.region, project=settings.project, network=settings.network,
        subnetwork=settings.subnetwork, remove_default_node_pool=True, initial_node_count=1,
        deletion_protection=False, min_master_version=source.kubernetes_version or None,
        release_channel=gcp.container.ClusterReleaseChannelArgs(channel="REGULAR"),
        datapath_provider="ADVANCED_DATAPATH" if rdma else None,
        enable_multi_networking=True if rdma else None,
        resource_labels=gcp_labels(name), opts=opts)
    gcp.container.NodePool(
        f"{name}-system", cluster=cluster.name, location=source.region, project=settings.project,
        autoscaling=gcp.container.NodePoolAutoscalingArgs(min_node_count=1, max_node_count=2),
        node_config=gcp.container.NodePoolNodeConfigArgs(
            machine_type=settings.system_machine_type, labels={LABEL_ROLE: "system"},
            resource_labels=gcp_labels(name)),
        opts=opts)
    for pool in pools:
        _gpu_pool(name, pool, fleet, cluster, source.region, settings, opts, rdma=rdma)
    return kubeconfig(cluster)


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


def _gpu_pool(name: str, pool: NodePool, fleet: Fleet, cluster: gcp.container.Cluster, region: str,
              settings: GcpArgs, opts: pulumi.ResourceOptions, *, rdma: bool) -> gcp.container.NodePool:
    prov = pool_provisioning(name, pool, fleet, "gke", "machineType, accelerator", opts.parent)
    interconnect = _wants_rdma(pool)
    autoscaling = None
    if pool.max_node_count:
        autoscaling = gcp.container.NodePoolAutoscalingArgs(
            min_node_count=pool.min_node_count or 0, max_node_count=pool.max_node_count)
    return gcp.container.NodePool(
        f"{name}-{pool.name}", cluster=cluster.name, location=region, project=settings.project,
        node_locations=pool.zones or None, node_count=pool.node_count, autoscaling=autoscaling,
        placement_policy=gcp.container.NodePoolPlacementPolicyArgs(type="COMPACT") if interconnect else None,
        network_config=_rdma_network_config(name, pool, settings, opts) if rdma and interconnect else None,
        node_config=gcp.container.NodePoolNodeConfigArgs(
            machine_type=prov.machine_type, disk_size_gb=prov.disk_size_gb,
            guest_accelerators=[gcp.container.NodePoolNodeConfigGuestAcceleratorArgs(
                type=prov.accelerator.type, count=prov.accelerator.count,
                gpu_driver_installation_config=gcp.container.NodePoolNodeConfigGuestAcceleratorGpuDriverInstallationConfigArgs(
                    gpu_driver_version="LATEST"))],
            gvnic=gcp.container.NodePoolNodeConfigGvnicArgs(enabled=True),
            labels={LABEL_POOL: pool.name}, resource_labels=gcp_labels(name, pool.name),
            oauth_scopes=["https://www.googleapis.com/auth/cloud-platform"]),
        opts=opts)
