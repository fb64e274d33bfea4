"""EKS: a VPC, the control plane, a system node group and one GPU node group per pool.

A pool with `fabric.type: EFA` gets a launch template whose network interfaces are EFA,
a cluster placement group (one spine, lowest latency), a security group that lets the
nodes talk to each other on every port (EFA requires it), and subnets in one zone.
"""

from __future__ import annotations

import json
from typing import Any

import pulumi
import pulumi_aws as aws

from components.args import AwsArgs
from components.errors import ResourceError
from components.labels import cloud_tags
from components.sources import pool_provisioning
from modelplane.api import Fleet, InferenceCluster, NodePool
from modelplane.render.meta import LABEL_POOL, LABEL_ROLE

DEFAULT_AMI = "AL2023_x86_64_NVIDIA"
# EFA-capable network cards per instance type; the first card also carries IP traffic.
EFA_CARDS = {"p5.48xlarge": 32, "p5e.48xlarge": 32, "p5en.48xlarge": 16, "p4d.24xlarge": 4,
             "p4de.24xlarge": 4, "p6-b200.48xlarge": 8, "g6e.48xlarge": 4}
_ASSUME = {"eks": "eks.amazonaws.com", "ec2": "ec2.amazonaws.com"}
NODE_POLICIES = ("AmazonEKSWorkerNodePolicy", "AmazonEKS_CNI_Policy", "AmazonEC2ContainerRegistryReadOnly")


def _role(name: str, service: str, policies: tuple[str, ...], opts: pulumi.ResourceOptions,
          tags: dict[str, str]) -> aws.iam.Role:
    doc = {"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Principal": {"Service": _ASSUME[service]}, "Action": "sts:AssumeRole"}]}
    role = aws.iam.Role(name, assume_role_policy=json.dumps(doc), tags=tags, opts=opts)
    for policy in policies:
        aws.iam.RolePolicyAttachment(f"{name}-{policy}", role=role.name,
                                     policy_arn=f"arn:aws:iam::aws:policy/{policy}", opts=opts)
    return role


def _network(name: str, zones: list[str], cidr: str, opts: pulumi.ResourceOptions,
             tags: dict[str, str]) -> tuple[aws.ec2.Vpc, dict[str, aws.ec2.Subnet]]:
    vpc = aws.ec2.Vpc(f"{name}-vpc", cidr_block=cidr, enable_dns_hostnames=True, enable_dns_support=True,
                      tags={**tags, "Name": name}, opts=opts)
    igw = aws.ec2.InternetGateway(f"{name}-igw", vpc_id=vpc.id, tags=tags, opts=opts)
    routes = aws.ec2.RouteTable(f"{name}-rt", vpc_id=vpc.id, tags=tags, opts=opts,
                                routes=[aws.ec2.RouteTableRouteArgs(cidr_block="0.0.0.0/0", gateway_id=igw.id)])
    subnets = {}
    base = cidr.split("/")[0].rsplit(".", 2)[0]  # "10.0"
    for i, zone in enumerate(zones):
        subnet = aws.ec2.Subnet(f"{name}-{zone}", vpc_id=vpc.id, availability_zone=zone,
                                cidr_block=f"{base}.{i * 16}.0/20", map_public_ip_on_launch=True,
                                tags={**tags, "kubernetes.io/role/elb": "1"}, opts=opts)
        aws.ec2.RouteTableAssociation(f"{name}-{zone}-rt", subnet_id=subnet.id, route_table_id=routes.id, opts=opts)
        subnets[zone] = subnet
    return vpc, subnets


def _efa_launch_template(name: str, pool: NodePool, instance_type: str, subnet: aws.ec2.Subnet, vpc: aws.ec2.Vpc,
                         cluster: aws.eks.Cluster, disk_gb: int, opts: pulumi.ResourceOptions,
                         tags: dict[str, str]) -> aws.ec2.LaunchTemplate:
    group = aws.ec2.PlacementGroup(f"{name}-pg", strategy="cluster", tags=tags, opts=opts)
    every = {"protocol": "-1", "from_port": 0, "to_port": 0}
    sg = aws.ec2.SecurityGroup(f"{name}-efa", vpc_id=vpc.id, description="EFA: all traffic between the pool's nodes",
                               ingress=[aws.ec2.SecurityGroupIngressArgs(**every, self=True)],
                               egress=[aws.ec2.SecurityGroupEgressArgs(**every, self=True),
                                       aws.ec2.SecurityGroupEgressArgs(**every, cidr_blocks=["0.0.0.0/0"])],
                               tags=tags, opts=opts)
    groups = [sg.id, cluster.vpc_config.cluster_security_group_id]
    cards = EFA_CARDS.get(instance_type, 1)
    nics = [aws.ec2.LaunchTemplateNetworkInterfaceArgs(
        network_card_index=card, device_index=0 if card == 0 else 1,
        interface_type="efa" if card == 0 else "efa-only", subnet_id=subnet.id,
        security_groups=groups, delete_on_termination="true") for card in range(cards)]
    market = None
    reservation = None
    if pool.capacity_block:
        market = aws.ec2.LaunchTemplateInstanceMarketOptionsArgs(market_type="capacity-block")
        reservation = aws.ec2.LaunchTemplateCapacityReservationSpecificationArgs(
            capacity_reservation_target=aws.ec2.LaunchTemplateCapacityReservationSpecificationCapacityReservationTargetArgs(
                capacity_reservation_id=pool.capacity_block.capacity_reservation_id))
    return aws.ec2.LaunchTemplate(
        f"{name}-lt", network_interfaces=nics,
        placement=aws.ec2.LaunchTemplatePlacementArgs(group_name=group.name),
        block_device_mappings=[aws.ec2.LaunchTemplateBlockDeviceMappingArgs(
            device_name="/dev/xvda", ebs=aws.ec2.LaunchTemplateBlockDeviceMappingEbsArgs(
                volume_size=disk_gb, volume_type="gp3", encrypted="true"))],
        metadata_options=aws.ec2.LaunchTemplateMetadataOptionsArgs(http_tokens="required",
                                                                   http_put_response_hop_limit=2),
        instance_market_options=market, capacity_reservation_specification=reservation,
        tag_specifications=[aws.ec2.LaunchTemplateTagSpecificationArgs(resource_type="instance", tags=tags)],
        update_default_version=True, tags=tags, opts=opts)


def kubeconfig(cluster: aws.eks.Cluster, region: str) -> pulumi.Output[str]:
    def build(args: list[Any]) -> str:
        name, endpoint, ca = args
        return json.dumps({
            "apiVersion": "v1", "kind": "Config", "current-context": name,
            "clusters": [{"name": name, "cluster": {"server": endpoint, "certificate-authority-data": ca}}],
            "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
            "users": [{"name": name, "user": {"exec": {
                "apiVersion": "client.authentication.k8s.io/v1beta1", "command": "aws",
                "args": ["eks", "get-token", "--cluster-name", name, "--region", region]}}}],
        })
    return pulumi.Output.secret(pulumi.Output.all(cluster.name, cluster.endpoint,
                                                  cluster.certificate_authority.data).apply(build))


def eks_cluster(name: str, spec: InferenceCluster, fleet: Fleet, settings: AwsArgs,
                parent: pulumi.Resource) -> pulumi.Output[str]:
    """Provision the cluster; returns its kubeconfig."""
    source = spec.spec.cluster.eks
    if source is None:
        raise ResourceError(f"InferenceCluster {name}: source EKS needs spec.cluster.eks", parent)
    tags = cloud_tags(name)
    region_provider = aws.Provider(f"{name}-aws", region=source.region, opts=pulumi.ResourceOptions(parent=parent))
    opts = pulumi.ResourceOptions(parent=parent, provider=region_provider)
    pools = spec.gpu_pools
    zones = sorted({z for p in pools for z in p.zones}) or [f"{source.region}a", f"{source.region}b"]
    if len(zones) < 2:  # the EKS control plane needs subnets in two zones
        zones = zones + [z for z in (f"{source.region}a", f"{source.region}b") if z not in zones][:1]
    vpc, subnets = _network(name, zones, settings.vpc_cidr, opts, tags)
    cluster_role = (settings.cluster_role_arn or
                    _role(f"{name}-cluster", "eks", ("AmazonEKSClusterPolicy",), opts, tags).arn)
    node_role = settings.node_role_arn or _role(f"{name}-node", "ec2", NODE_POLICIES, opts, tags).arn
    cluster = aws.eks.Cluster(
        name, role_arn=cluster_role, version=source.kubernetes_version or "1.35",
        vpc_config=aws.eks.ClusterVpcConfigArgs(subnet_ids=[s.id for s in subnets.values()],
                                                endpoint_public_access=True),
        access_config=aws.eks.ClusterAccessConfigArgs(authentication_mode="API",
                                                      bootstrap_cluster_creator_admin_permissions=True),
        tags=tags, opts=opts)
    aws.eks.NodeGroup(f"{name}-system", cluster_name=cluster.name, node_role_arn=node_role,
                      subnet_ids=[s.id for s in subnets.values()], instance_types=[settings.system_instance_type],
                      scaling_config=aws.eks.NodeGroupScalingConfigArgs(desired_size=1, min_size=1, max_size=2),
                      labels={LABEL_ROLE: "system"}, tags=tags, opts=opts)
    for pool in pools:
        _gpu_node_group(name, pool, fleet, cluster, node_role, vpc, subnets, opts)
    return kubeconfig(cluster, source.region)


def _gpu_node_group(name: str, pool: NodePool, fleet: Fleet, cluster: aws.eks.Cluster, node_role: pulumi.Input[str],
                    vpc: aws.ec2.Vpc, subnets: dict[str, aws.ec2.Subnet],
                    opts: pulumi.ResourceOptions) -> aws.eks.NodeGroup:
    prov = pool_provisioning(name, pool, fleet, "eks", "instanceType, accelerator", opts.parent)
    tags = cloud_tags(name, pool.name)
    efa = pool.fabric.type == "EFA"
    pool_zones = pool.zones or sorted(subnets)
    # EFA and placement groups work within one zone only.
    zone_subnets = [subnets[pool_zones[0]]] if efa else [subnets[z] for z in pool_zones]
    lt = None
    if efa:
        lt = _efa_launch_template(f"{name}-{pool.name}", pool, prov.instance_type, zone_subnets[0], vpc,
                                  cluster, prov.disk_size_gb, opts, tags)
    low = min(pool.node_count if pool.min_node_count is None else pool.min_node_count, pool.node_count)
    high = max(pool.max_node_count or pool.node_count, pool.node_count, 1)
    return aws.eks.NodeGroup(
        f"{name}-{pool.name}", cluster_name=cluster.name, node_role_arn=node_role,
        subnet_ids=[s.id for s in zone_subnets], instance_types=[prov.instance_type],
        ami_type=prov.ami_type or DEFAULT_AMI,
        capacity_type="CAPACITY_BLOCK" if pool.capacity_block else "ON_DEMAND",
        disk_size=None if lt else prov.disk_size_gb,
        launch_template=(aws.eks.NodeGroupLaunchTemplateArgs(id=lt.id, version=lt.latest_version.apply(str))
                         if lt else None),
        scaling_config=aws.eks.NodeGroupScalingConfigArgs(desired_size=pool.node_count, min_size=low, max_size=high),
        labels={LABEL_POOL: pool.name},
        taints=[aws.eks.NodeGroupTaintArgs(key="nvidia.com/gpu", value="present", effect="NO_SCHEDULE")],
        tags=tags, opts=opts)
