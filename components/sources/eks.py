"""EKS: a VPC with public and private subnets behind a NAT gateway, the control plane, a
system node group, one GPU node group per pool, and ReadWriteMany storage for caches (EFS).

Rules this follows (each has a contract test in tests/pulumi/test_cloud_contracts.py):

* GPU node groups live in private subnets that reach the API endpoint through a NAT
  gateway: a node with several network interfaces (every EFA node) gets no public IPv4
  address ("AssociatePublicIpAddress ... cannot specify more than one network interface",
  EC2 API InstanceNetworkInterfaceSpecification).
* A launch template used by a managed node group must not set `SubnetId` (its network
  interfaces included): the node group's subnets decide ("AWS::EKS::Nodegroup
  LaunchTemplateSpecification"; EKS CreateNodegroup `subnets`).
* EFA pools: one EFA interface per network card, card 0 device 0 `efa`, every other card
  device 0 `efa-only` (EC2 user guide, "Maximize network bandwidth on EC2 instances with
  multiple network cards"), a cluster placement group, a security group open to itself.
* Capacity blocks: only with a launch template that names the instance type, the
  `capacity-block` market and the reservation ("Create a managed node group with Capacity
  Blocks for ML", EKS user guide); the node group then names no instance types.
* Caches: the EFS CSI driver add-on (Pod Identity for its controller), an EFS file system
  with a mount target per private subnet open to NFS from the VPC, and the StorageClass
  modelplane.storage names.
* Pools that can grow: their node groups' Auto Scaling groups carry the cluster-autoscaler's
  discovery tags with the cluster's physical name, and its service account gets a Pod Identity
  role with the actions its AWS README lists (modelplane.clouds.aws; the chart itself is the
  serving stack's, and waits for the association: `ProvisionedCluster.chart_dependencies`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from components.args import AwsArgs
from components.errors import ResourceError
from components.labels import cloud_tags
from components.sources import ProvisionedCluster, pool_provisioning
from modelplane.api import Fleet, InferenceCluster, NodePool
from modelplane.api.kubernetes_versions import cluster_version
from modelplane.clouds.aws import (
    AUTOSCALER_ENABLED_TAG,
    AUTOSCALER_IAM_STATEMENTS,
    AUTOSCALER_NAMESPACE,
    AUTOSCALER_SERVICE_ACCOUNT,
    EFA_INTERFACES,
    autoscaler_cluster_tag,
    efa_instance_types,
    eks_pool_zones,
    eks_zones,
    node_group_scaling,
)
from modelplane.clouds.nodes import (
    SYSTEM_POOL_LABELS,
    SYSTEM_POOL_MAX_NODES,
    SYSTEM_POOL_NODES,
    provisioned_node_labels,
    provisioned_node_taints,
)
from modelplane.json_types import JsonObject
from modelplane.render.storage_class import storage_class_manifest

DEFAULT_AMI = "AL2023_x86_64_NVIDIA"
_ASSUME = {"eks": "eks.amazonaws.com", "ec2": "ec2.amazonaws.com", "pods": "pods.eks.amazonaws.com"}
NODE_POLICIES = ("AmazonEKSWorkerNodePolicy", "AmazonEKS_CNI_Policy", "AmazonEC2ContainerRegistryReadOnly")
EFS_CSI_POLICY = "service-role/AmazonEFSCSIDriverPolicy"
EFS_CSI_SERVICE_ACCOUNT = "efs-csi-controller-sa"
NFS_PORT = 2049
TAINT_EFFECTS = {"NoSchedule": "NO_SCHEDULE", "NoExecute": "NO_EXECUTE", "PreferNoSchedule": "PREFER_NO_SCHEDULE"}


def _role(name: str, service: str, policies: tuple[str, ...], opts: pulumi.ResourceOptions,
          tags: dict[str, str]) -> aws.iam.Role:
    actions = ["sts:AssumeRole", "sts:TagSession"] if service == "pods" else "sts:AssumeRole"
    doc = {"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Principal": {"Service": _ASSUME[service]}, "Action": actions}]}
    role = aws.iam.Role(name, assume_role_policy=json.dumps(doc), tags=tags, opts=opts)
    for policy in policies:
        aws.iam.RolePolicyAttachment(f"{name}-{policy.rsplit('/', 1)[-1]}", role=role.name,
                                     policy_arn=f"arn:aws:iam::aws:policy/{policy}", opts=opts)
    return role


@dataclass
class Network:
    vpc: aws.ec2.Vpc
    public: dict[str, aws.ec2.Subnet]
    private: dict[str, aws.ec2.Subnet]


def _network(name: str, zones: list[str], cidr: str, opts: pulumi.ResourceOptions,
             tags: dict[str, str]) -> Network:
    vpc = aws.ec2.Vpc(f"{name}-vpc", cidr_block=cidr, enable_dns_hostnames=True, enable_dns_support=True,
                      tags={**tags, "Name": name}, opts=opts)
    igw = aws.ec2.InternetGateway(f"{name}-igw", vpc_id=vpc.id, tags=tags, opts=opts)
    public_routes = aws.ec2.RouteTable(f"{name}-rt", vpc_id=vpc.id, tags=tags, opts=opts, routes=[
        aws.ec2.RouteTableRouteArgs(cidr_block="0.0.0.0/0", gateway_id=igw.id)])
    base = cidr.split("/")[0].rsplit(".", 2)[0]  # "10.0"
    public: dict[str, aws.ec2.Subnet] = {}
    private: dict[str, aws.ec2.Subnet] = {}
    for i, zone in enumerate(zones):
        subnet = aws.ec2.Subnet(f"{name}-{zone}", vpc_id=vpc.id, availability_zone=zone,
                                cidr_block=f"{base}.{i * 16}.0/20", map_public_ip_on_launch=True,
                                tags={**tags, "kubernetes.io/role/elb": "1"}, opts=opts)
        aws.ec2.RouteTableAssociation(f"{name}-{zone}-rt", subnet_id=subnet.id, route_table_id=public_routes.id,
                                      opts=opts)
        public[zone] = subnet
    # One NAT gateway (in the first zone) for the private subnets: nodes reach the API
    # endpoint, registries and the Hub through it.
    eip = aws.ec2.Eip(f"{name}-nat", domain="vpc", tags=tags, opts=opts)
    nat = aws.ec2.NatGateway(f"{name}-nat", allocation_id=eip.id, subnet_id=public[zones[0]].id, tags=tags,
                             opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[igw])))
    private_routes = aws.ec2.RouteTable(f"{name}-private-rt", vpc_id=vpc.id, tags=tags, opts=opts, routes=[
        aws.ec2.RouteTableRouteArgs(cidr_block="0.0.0.0/0", nat_gateway_id=nat.id)])
    for i, zone in enumerate(zones):
        subnet = aws.ec2.Subnet(f"{name}-{zone}-private", vpc_id=vpc.id, availability_zone=zone,
                                cidr_block=f"{base}.{128 + i * 16}.0/20", map_public_ip_on_launch=False,
                                tags={**tags, "kubernetes.io/role/internal-elb": "1"}, opts=opts)
        aws.ec2.RouteTableAssociation(f"{name}-{zone}-private-rt", subnet_id=subnet.id,
                                      route_table_id=private_routes.id, opts=opts)
        private[zone] = subnet
    return Network(vpc, public, private)


def _network_interfaces(groups: list[pulumi.Input[str]], cards: int
                        ) -> list[aws.ec2.LaunchTemplateNetworkInterfaceArgs]:
    """One EFA interface per network card; never a subnet (the node group decides)."""
    return [aws.ec2.LaunchTemplateNetworkInterfaceArgs(
        network_card_index=card, device_index=0, interface_type="efa" if card == 0 else "efa-only",
        security_groups=groups, delete_on_termination="true") for card in range(cards)]


def _launch_template(name: str, pool: NodePool, instance_type: str, network: Network, cluster: aws.eks.Cluster,
                     disk_gb: int, opts: pulumi.ResourceOptions, tags: dict[str, str]) -> aws.ec2.LaunchTemplate:
    """The pool's launch template: EFA interfaces and a placement group for EFA pools, the
    instance type and reservation for capacity blocks."""
    efa = pool.fabric.type == "EFA"
    nics = None
    placement = None
    security_group_ids = None
    if efa:
        group = aws.ec2.PlacementGroup(f"{name}-pg", strategy="cluster", tags=tags, opts=opts)
        every = {"protocol": "-1", "from_port": 0, "to_port": 0}
        sg = aws.ec2.SecurityGroup(f"{name}-efa", vpc_id=network.vpc.id,
                                   description="EFA: all traffic between the pool's nodes",
                                   ingress=[aws.ec2.SecurityGroupIngressArgs(**every, self=True)],
                                   egress=[aws.ec2.SecurityGroupEgressArgs(**every, self=True),
                                           aws.ec2.SecurityGroupEgressArgs(**every, cidr_blocks=["0.0.0.0/0"])],
                                   tags=tags, opts=opts)
        nics = _network_interfaces([sg.id, cluster.vpc_config.cluster_security_group_id],
                                   EFA_INTERFACES[instance_type])
        placement = aws.ec2.LaunchTemplatePlacementArgs(group_name=group.name)
    else:
        security_group_ids = [cluster.vpc_config.cluster_security_group_id]
    market = None
    reservation = None
    if pool.capacity_block:
        market = aws.ec2.LaunchTemplateInstanceMarketOptionsArgs(market_type="capacity-block")
        reservation = aws.ec2.LaunchTemplateCapacityReservationSpecificationArgs(
            capacity_reservation_target=aws.ec2.LaunchTemplateCapacityReservationSpecificationCapacityReservationTargetArgs(
                capacity_reservation_id=pool.capacity_block.capacity_reservation_id))
    return aws.ec2.LaunchTemplate(
        f"{name}-lt", network_interfaces=nics, vpc_security_group_ids=security_group_ids, placement=placement,
        # Capacity blocks need the instance type in the template (and then not in the node group).
        instance_type=instance_type if pool.capacity_block else None,
        block_device_mappings=[aws.ec2.LaunchTemplateBlockDeviceMappingArgs(
            device_name="/dev/xvda", ebs=aws.ec2.LaunchTemplateBlockDeviceMappingEbsArgs(
                volume_size=disk_gb, volume_type="gp3", encrypted="true"))],
        metadata_options=aws.ec2.LaunchTemplateMetadataOptionsArgs(http_tokens="required",
                                                                   http_put_response_hop_limit=2),
        instance_market_options=market, capacity_reservation_specification=reservation,
        tag_specifications=[aws.ec2.LaunchTemplateTagSpecificationArgs(resource_type="instance", tags=tags)],
        update_default_version=True, tags=tags, opts=opts)


def kubeconfig(cluster: aws.eks.Cluster, region: str) -> pulumi.Output[str]:
    def build(args: list[str]) -> str:
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


def _check_pools(name: str, spec: InferenceCluster, fleet: Fleet, parent: pulumi.Resource) -> None:
    """Refuse at preview what EKS would refuse (or silently get wrong) at `up`."""
    for pool in spec.gpu_pools:
        prov = pool_provisioning(spec, pool, fleet, parent)
        where = f"{fleet.source_of(spec)}: InferenceCluster {name} pool {pool.name}"
        if pool.fabric.type == "EFA" and prov.instance_type not in EFA_INTERFACES:
            raise ResourceError(f"{where}: fabric EFA on instance type {prov.instance_type!r}, which is not one "
                                f"known to carry EFA ({efa_instance_types()}); its nodes would get no "
                                "EFA interfaces and gangs would run over TCP. Fix: use an EFA instance type or "
                                "fabric.type: None", parent)
        if pool.fabric.type == "EFA" and len(pool.zones) != 1:
            raise ResourceError(f"{where}: fabric EFA needs exactly one zone in zones (EFA traffic and cluster "
                                f"placement groups stay within one Availability Zone); it lists {pool.zones or 'none'}",
                                parent)


def eks_cluster(name: str, spec: InferenceCluster, fleet: Fleet, settings: AwsArgs,
                parent: pulumi.Resource) -> ProvisionedCluster:
    """Provision the cluster; returns its kubeconfig and the cache StorageClass to register."""
    source = spec.spec.cluster.eks
    if source is None:
        raise ResourceError(f"InferenceCluster {name}: source EKS needs spec.cluster.eks", parent)
    _check_pools(name, spec, fleet, parent)
    tags = cloud_tags(name)
    region_provider = aws.Provider(f"{name}-aws", region=source.region, opts=pulumi.ResourceOptions(parent=parent))
    opts = pulumi.ResourceOptions(parent=parent, provider=region_provider)
    pools = spec.gpu_pools
    zones = eks_zones(spec)
    network = _network(name, zones, settings.vpc_cidr, opts, tags)
    cluster_role = (settings.cluster_role_arn or
                    _role(f"{name}-cluster", "eks", ("AmazonEKSClusterPolicy",), opts, tags).arn)
    node_role = settings.node_role_arn or _role(f"{name}-node", "ec2", NODE_POLICIES, opts, tags).arn
    private = [s.id for s in network.private.values()]
    cluster = aws.eks.Cluster(
        name, role_arn=cluster_role, version=cluster_version(spec),
        vpc_config=aws.eks.ClusterVpcConfigArgs(subnet_ids=[*private, *(s.id for s in network.public.values())],
                                                endpoint_public_access=True, endpoint_private_access=True),
        access_config=aws.eks.ClusterAccessConfigArgs(authentication_mode="API",
                                                      bootstrap_cluster_creator_admin_permissions=True),
        tags=tags, opts=opts)
    system = aws.eks.NodeGroup(
        f"{name}-system", cluster_name=cluster.name, node_role_arn=node_role, subnet_ids=private,
        instance_types=[settings.system_instance_type],
        scaling_config=aws.eks.NodeGroupScalingConfigArgs(desired_size=SYSTEM_POOL_NODES, min_size=SYSTEM_POOL_NODES,
                                                          max_size=SYSTEM_POOL_MAX_NODES),
        labels=dict(SYSTEM_POOL_LABELS), tags=tags, opts=opts)
    groups = {pool.name: _gpu_node_group(name, pool, fleet, spec, cluster, node_role, network, opts) for pool in pools}
    agent = aws.eks.Addon(f"{name}-pod-identity", cluster_name=cluster.name, addon_name="eks-pod-identity-agent",
                          tags=tags, opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(
                              depends_on=[system])))
    storage = _efs_storage(name, cluster, network, settings, opts, tags, agent)
    association = _autoscaling(name, spec, cluster, groups, opts, tags, system, agent)
    waits = {"cluster-autoscaler": [association]} if association is not None else {}
    return ProvisionedCluster(kubeconfig(cluster, source.region), storage, physical_name=cluster.name,
                              chart_dependencies=waits)


def _first_asg(resources: list[aws.eks.outputs.NodeGroupResource] | None) -> str:
    """The name of a managed node group's Auto Scaling group (its `resources` output; empty
    until EKS created the group, e.g. in a preview)."""
    for res in resources or []:
        for group in res.autoscaling_groups or []:
            if group.name:
                return str(group.name)
    return ""


def _autoscaling(name: str, spec: InferenceCluster, cluster: aws.eks.Cluster, groups: dict[str, aws.eks.NodeGroup],
                 opts: pulumi.ResourceOptions, tags: dict[str, str], system: aws.eks.NodeGroup,
                 agent: aws.eks.Addon) -> aws.eks.PodIdentityAssociation | None:
    """Discovery tags on the Auto Scaling group of every pool that can grow, and the Pod Identity
    role the cluster-autoscaler acts with (kubernetes/autoscaler cluster-autoscaler/cloudprovider/
    aws/README.md: "Auto-Discovery Setup", "Full Cluster Autoscaler Features Policy"). Returns the
    association, which the chart must wait for: EKS injects Pod Identity credentials when a pod is
    created, so a pod created before the association runs with the node role and stays denied."""
    growable = spec.autoscaled_pools
    if not growable:
        return None
    # The cluster's own tag carries its physical name (cluster.name: `<name>-<suffix>`), which the
    # chart is given too (components/fleet/base.py): a stack never discovers another stack's groups.
    # Resource names stay as before (`<cluster>-<pool>-enabled`, `<cluster>-<pool>-<cluster>`).
    cluster_tag = cluster.name.apply(autoscaler_cluster_tag)
    for pool in growable:
        asg = groups[pool.name].resources.apply(_first_asg)
        for suffix, key, value in (("enabled", AUTOSCALER_ENABLED_TAG, "true"), (name, cluster_tag, "owned")):
            aws.autoscaling.Tag(f"{name}-{pool.name}-{suffix}", autoscaling_group_name=asg,
                                tag=aws.autoscaling.TagTagArgs(key=key, value=value, propagate_at_launch=False),
                                opts=opts)
    role = _role(f"{name}-autoscaler", "pods", (), opts, tags)
    aws.iam.RolePolicy(f"{name}-autoscaler", role=role.id, opts=opts, policy=json.dumps(
        {"Version": "2012-10-17", "Statement": list(AUTOSCALER_IAM_STATEMENTS)}))
    # After the Pod Identity agent add-on (_efs_storage) and the system nodes it runs on.
    return aws.eks.PodIdentityAssociation(
        f"{name}-autoscaler", cluster_name=cluster.name, namespace=AUTOSCALER_NAMESPACE,
        service_account=AUTOSCALER_SERVICE_ACCOUNT, role_arn=role.arn, tags=tags,
        opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[system, agent])))


def _gpu_node_group(name: str, pool: NodePool, fleet: Fleet, spec: InferenceCluster, cluster: aws.eks.Cluster,
                    node_role: pulumi.Input[str], network: Network, opts: pulumi.ResourceOptions) -> aws.eks.NodeGroup:
    prov = pool_provisioning(spec, pool, fleet, opts.parent)
    tags = cloud_tags(name, pool.name)
    subnets = [network.private[z] for z in eks_pool_zones(spec, pool)]
    lt = None
    if pool.fabric.type == "EFA" or pool.capacity_block:
        lt = _launch_template(f"{name}-{pool.name}", pool, prov.instance_type, network, cluster, prov.disk_size_gb,
                              opts, tags)
    scaling = node_group_scaling(pool)
    return aws.eks.NodeGroup(
        f"{name}-{pool.name}", cluster_name=cluster.name, node_role_arn=node_role,
        subnet_ids=[s.id for s in subnets],
        # A template that names the instance type (capacity blocks) leaves none to the group.
        instance_types=None if pool.capacity_block else [prov.instance_type],
        ami_type=prov.ami_type or DEFAULT_AMI,
        capacity_type="CAPACITY_BLOCK" if pool.capacity_block else "ON_DEMAND",
        disk_size=None if lt else prov.disk_size_gb,
        launch_template=(aws.eks.NodeGroupLaunchTemplateArgs(id=lt.id, version=lt.latest_version.apply(str))
                         if lt else None),
        scaling_config=aws.eks.NodeGroupScalingConfigArgs(desired_size=scaling.desired_size,
                                                          min_size=scaling.min_size, max_size=scaling.max_size),
        labels=provisioned_node_labels(fleet, spec, pool),
        # The API spells effects in upper snake case (NO_SCHEDULE).
        taints=[aws.eks.NodeGroupTaintArgs(**{**t, "effect": TAINT_EFFECTS[t["effect"]]})
                for t in provisioned_node_taints(spec, pool)],
        tags=tags, opts=opts)


def _efs_storage(name: str, cluster: aws.eks.Cluster, network: Network, settings: AwsArgs,
                 opts: pulumi.ResourceOptions, tags: dict[str, str], agent: aws.eks.Addon) -> JsonObject:
    """EFS for ModelCache PVCs: the file system, its mount targets, the CSI driver add-on (after
    the Pod Identity agent, itself after the system nodes that run its controller) and the
    StorageClass manifest."""
    fs = aws.efs.FileSystem(f"{name}-cache", encrypted=True, throughput_mode="elastic",
                            tags={**tags, "Name": f"{name}-cache"}, opts=opts)
    nfs = aws.ec2.SecurityGroup(f"{name}-nfs", vpc_id=network.vpc.id, description="NFS from the VPC to EFS",
                                ingress=[aws.ec2.SecurityGroupIngressArgs(protocol="tcp", from_port=NFS_PORT,
                                                                          to_port=NFS_PORT,
                                                                          cidr_blocks=[settings.vpc_cidr])],
                                tags=tags, opts=opts)
    targets = [aws.efs.MountTarget(f"{name}-cache-{zone}", file_system_id=fs.id, subnet_id=subnet.id,
                                   security_groups=[nfs.id], opts=opts)
               for zone, subnet in sorted(network.private.items())]
    role = _role(f"{name}-efs-csi", "pods", (EFS_CSI_POLICY,), opts, tags)
    aws.eks.Addon(f"{name}-efs-csi", cluster_name=cluster.name, addon_name="aws-efs-csi-driver",
                  pod_identity_associations=[aws.eks.AddonPodIdentityAssociationArgs(
                      role_arn=role.arn, service_account=EFS_CSI_SERVICE_ACCOUNT)],
                  tags=tags, opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(
                      depends_on=[agent, *targets])))
    # The file system's id is an Output inside plain data: Pulumi resolves it as an input.
    return storage_class_manifest("EKS", file_system_id=fs.id)
