"""AWS facts: EFA interfaces per instance type and how pods get them.

EFA devices reach pods only through a device plugin or a DRA driver ("Manage EFA devices on
Amazon EKS", https://docs.aws.amazon.com/eks/latest/userguide/device-management-efa.html):

* the EFA device plugin (chart aws/eks-charts stable/aws-efa-k8s-device-plugin) publishes each
  interface as one `vpc.amazonaws.com/efa` extended resource, and a pod gets EFA devices only
  by requesting them. It hands out whole interfaces with no regard to which GPU the pod was
  given: on a partial node the EFAs may sit under another PCIe root than the pod's GPUs;
* DRANET (chart stable/aws-dranet, driver `dra.net`, DeviceClass `efa.networking.k8s.aws`)
  publishes each interface as a DRA device carrying `resource.kubernetes.io/pcieRoot`, as the
  NVIDIA driver does for GPUs, so one claim can align each GPU with its EFAs. Both must never
  manage the same node's NICs.

A class that declares `dra.net` devices takes the DRA path; any other EFA pool the plugin's.
A gang on an EFA pool whose pods get no EFA runs NCCL over TCP.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from modelplane.api import Fleet, InferenceClass, InferenceCluster, NodePool
from modelplane.clouds.pcie import PCIE_TOPOLOGY
from modelplane.vocabulary import DRANET_DRIVER

EFA_RESOURCE = "vpc.amazonaws.com/efa"
# What the aws-dranet chart names its DeviceClass (values.yaml `deviceClass.name`).
EFA_DEVICE_CLASS = "efa.networking.k8s.aws"
# The system node group's instance type unless the stack sets aws.systemInstanceType.
SYSTEM_INSTANCE_TYPE = "m6i.xlarge"
# EFA interfaces per instance type, for the GPU instance types the EFA device plugin chart
# supports (aws/eks-charts stable/aws-efa-k8s-device-plugin/values.yaml `supportedInstanceLabels`,
# chart v0.5.30): the EFA devices each instance carries, as scraped from EC2 for DRA
# (aws/karpenter-provider-aws pkg/providers/drametadata/zz_generated_efa_metadata.go,
# `EFAMetadataByInstanceType[...].Count`), one per EFA network card (EC2 user guide, "Maximize
# network bandwidth on EC2 instances with multiple network cards"). One home: counted from the
# PCIe topology table (modelplane.clouds.pcie), which lists each of those devices' root.
EFA_INTERFACES: dict[str, int] = {t: len(topology.efas) for t, topology in PCIE_TOPOLOGY.items()}

EfaMode = Literal["dra", "device-plugin"]

# The cluster-autoscaler on EKS (kubernetes/autoscaler cluster-autoscaler/cloudprovider/aws/README.md):
# it finds the Auto Scaling groups it may resize by tags ("Auto-Discovery Setup": `--node-group-
# auto-discovery=asg:tag=k8s.io/cluster-autoscaler/enabled,k8s.io/cluster-autoscaler/<cluster-name>`;
# "Without the tags, the Cluster Autoscaler will be unable to add new instances to the ASG"), and
# only adjusts their desired size within their min and max. We tag exactly the node groups of pools
# that can grow, with the EKS cluster's physical name (Pulumi's `<name>-<suffix>`, unique per stack),
# which the chart's autoDiscovery.clusterName repeats (charts/cluster-autoscaler/values.yaml
# `autoDiscovery.tags`; modelplane.render.serving.bind_eks_cluster_name).
AUTOSCALER_NAMESPACE = "cluster-autoscaler"
AUTOSCALER_SERVICE_ACCOUNT = "cluster-autoscaler"
# "Full Cluster Autoscaler Features Policy (Recommended)" of the same README.
AUTOSCALER_IAM_STATEMENTS: tuple[dict[str, object], ...] = (
    {"Effect": "Allow", "Resource": "*", "Action": [
        "autoscaling:DescribeAutoScalingGroups", "autoscaling:DescribeAutoScalingInstances",
        "autoscaling:DescribeLaunchConfigurations", "autoscaling:DescribeScalingActivities",
        "ec2:DescribeImages", "ec2:DescribeInstanceTypes", "ec2:DescribeLaunchTemplateVersions",
        "ec2:GetInstanceTypesFromInstanceRequirements", "eks:DescribeNodegroup"]},
    {"Effect": "Allow", "Resource": "*", "Action": [
        "autoscaling:SetDesiredCapacity", "autoscaling:TerminateInstanceInAutoScalingGroup"]},
)


def eks_zones(cluster: InferenceCluster) -> list[str]:
    """The Availability Zones an EKS cluster's VPC spans: its GPU pools' zones, else the region's
    first two; always at least two, because the EKS control plane needs subnets in two."""
    eks = cluster.spec.cluster.eks
    region = eks.region if eks is not None else ""
    defaults = [f"{region}a", f"{region}b"]
    zones = sorted({z for p in cluster.gpu_pools for z in p.zones}) or defaults
    if len(zones) < 2:
        zones = zones + [z for z in defaults if z not in zones][:1]
    return zones


def eks_pool_zones(cluster: InferenceCluster, pool: NodePool) -> list[str]:
    """The zones a pool's node group spans: its own, else every zone of the cluster's VPC."""
    return list(pool.zones) or eks_zones(cluster)


AUTOSCALER_ENABLED_TAG = "k8s.io/cluster-autoscaler/enabled"


def autoscaler_cluster_tag(cluster_name: str) -> str:
    """The discovery tag naming the cluster: `cluster_name` is the EKS cluster's physical name."""
    return f"k8s.io/cluster-autoscaler/{cluster_name}"


def autoscaler_discovery_tags(cluster_name: str) -> dict[str, str]:
    """The Auto Scaling group tags the cluster-autoscaler discovers a growable pool's group by,
    for the EKS cluster whose physical name is `cluster_name`."""
    return {AUTOSCALER_ENABLED_TAG: "true", autoscaler_cluster_tag(cluster_name): "owned"}


@dataclass(frozen=True)
class NodeGroupScaling:
    """An EKS managed node group's scaling_config for a fleet pool."""

    min_size: int
    desired_size: int
    max_size: int

    @property
    def autoscaled(self) -> bool:
        return self.max_size > self.min_size


def node_group_scaling(pool: NodePool) -> NodeGroupScaling:
    """An EKS node group's min, desired and max: the pool's size bounds (NodePool.size_bounds)."""
    return NodeGroupScaling(*pool.size_bounds)


def efa_instance_types() -> str:
    """For messages: the EFA instance types we know, largest GPU types first."""
    p_types = [t for t in EFA_INTERFACES if t.startswith("p")]
    return ", ".join(p_types) + f" and {len(EFA_INTERFACES) - len(p_types)} g-family types (modelplane.clouds.aws)"


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


def _class_of(fleet: Fleet, pool: NodePool) -> InferenceClass | None:
    return fleet.classes.get(pool.class_name or "")


def declares_dra_efa(klass: InferenceClass | None) -> bool:
    """The class claims its EFA interfaces as DRA devices of DRANET (`dra.net`)."""
    return klass is not None and any(d.claim == "DRA" and d.driver == DRANET_DRIVER for d in klass.spec.devices)


def efa_mode(fleet: Fleet, pool: NodePool) -> EfaMode | None:
    """How a pool's EFA interfaces reach pods: through DRANET when its class declares `dra.net`
    devices, else through the EFA device plugin; None when the pool has no EFA."""
    klass = _class_of(fleet, pool)
    if declares_dra_efa(klass):
        return "dra"
    return "device-plugin" if pool.fabric.type == "EFA" else None


def _gpus_per_node(fleet: Fleet, pool: NodePool) -> int:
    klass = _class_of(fleet, pool)
    return sum(d.count for d in klass.spec.devices if d.claim == "DRA" and d.driver != DRANET_DRIVER) \
        if klass is not None else 0


@dataclass(frozen=True)
class EfaShare:
    """EFA devices one pod of a member requests, or why it gets none."""

    devices: int
    reason: str | None = None      # set when devices == 0 on an EFA pool


def member_efa_share(fleet: Fleet, cluster: InferenceCluster, pool: NodePool, claimed: int, *,
                     crosses_nodes: bool = True) -> EfaShare | None:
    """`vpc.amazonaws.com/efa` per pod for a member claiming `claimed` GPUs on `pool`: the
    node's EFA interfaces in proportion to the GPUs claimed (all of them for a whole node).
    None when the pool's EFA does not go through the device plugin (no EFA, or DRA EFA, which
    the member claims itself). Device plugins hand out whole interfaces, one pod each, so
    proportional shares keep the other pods on the node schedulable. A member whose traffic
    never leaves its node (`crosses_nodes` False: a Standalone engine outside PrefillDecode)
    gets none: it would hold interfaces it never uses."""
    if efa_mode(fleet, pool) != "device-plugin":
        return None
    if claimed <= 0:
        return EfaShare(0, "the member claims no GPU, so it takes no part in GPU-to-GPU traffic")
    if not crosses_nodes:
        return EfaShare(0, "the member's traffic stays on its node (no gang, no NIXL pair)")
    interfaces = pool_efa_interfaces(fleet, pool)
    if interfaces is None:
        instance = pool_instance_type(fleet, pool)
        what = (f"instance type {instance!r} is not one known to carry EFA ({efa_instance_types()})"
                if instance else "its class has no provisioning.eks.instanceType")
        return EfaShare(0, f"pool {pool.name!r} of InferenceCluster {cluster.metadata.name} declares EFA but "
                           f"{what}, so the number of EFA devices its nodes carry is unknown")
    per_node = _gpus_per_node(fleet, pool)
    share = interfaces if per_node <= 0 or claimed >= per_node else max(1, interfaces * claimed // per_node)
    return EfaShare(share)


# Gateway Services of type LoadBalancer on EKS. Without annotations the in-tree AWS cloud provider
# makes a Classic Load Balancer, whose idle timeout is 60 s (kubernetes/cloud-provider-aws
# docs/service_controller.md, `aws-load-balancer-connection-idle-timeout`, default 60, ELB only):
# a non-streaming completion longer than that was cut and answered 502. We ask for a Network Load
# Balancer instead (`aws-load-balancer-type: nlb`), internal or internet-facing
# (`aws-load-balancer-internal`, ELB and NLB). An NLB forwards TCP and drops a flow after its
# idle timeout, 350 s by default ("Update the TCP idle timeout for your Network Load Balancer
# listener": 60-6000 s, `tcp.idle_timeout.seconds`), counted from the last packet: TCP keepalives
# reset it (AWS blog "Implementing long-running TCP Connections within VPC networking"), and
# Traefik sends them on both sides, every 30 s on the connections it dials (traefik/traefik
# pkg/server/service/transport.go `KeepAlive: 30 * time.Second`) and every 15 s on those it
# accepts (Go's net.ListenConfig default; Traefik leaves it 0). Should the AWS Load Balancer
# Controller take the Service over (its webhook does so for new Services), it reads
# `aws-load-balancer-scheme` (default internal!) and the listener's idle timeout from
# `aws-load-balancer-listener-attributes.TCP-<port>` (kubernetes-sigs/aws-load-balancer-controller
# guide/service/annotations): both are set, the timeout to fit the longest request the fleet's
# ModelServices declare (spec.timeouts.request). An internal gateway is dialled from the
# cluster's own nodes (the control plane runs there), which are the NLB's instance targets: with
# the client IP preserved (the default for instance targets) such hairpin connections fail, so it
# is turned off (cloud-provider-aws docs/service_controller.md, "working with hairpin connection
# on internal NLB": `aws-load-balancer-target-group-attributes: preserve_client_ip.enabled=false`).
LB_TYPE_ANNOTATION = "service.beta.kubernetes.io/aws-load-balancer-type"
LB_INTERNAL_ANNOTATION = "service.beta.kubernetes.io/aws-load-balancer-internal"
LB_SCHEME_ANNOTATION = "service.beta.kubernetes.io/aws-load-balancer-scheme"
LB_TARGET_GROUP_ANNOTATION = "service.beta.kubernetes.io/aws-load-balancer-target-group-attributes"
LB_LISTENER_ATTRIBUTES_ANNOTATION = "service.beta.kubernetes.io/aws-load-balancer-listener-attributes.TCP-{port}"
NLB_IDLE_TIMEOUT_DEFAULT_S = 350
NLB_IDLE_TIMEOUT_MAX_S = 6000


def nlb_idle_timeout_seconds(fleet: Fleet) -> int:
    """The NLB idle timeout that fits the longest request any ModelService of the fleet declares:
    at least the NLB's default, at most its maximum."""
    longest = max((svc.request_timeout_seconds for svc in fleet.services.values()), default=0.0)
    return int(min(max(NLB_IDLE_TIMEOUT_DEFAULT_S, -(-longest // 1)), NLB_IDLE_TIMEOUT_MAX_S))


def gateway_service_annotations(fleet: Fleet, ports: Sequence[int], *, internal: bool) -> dict[str, str]:
    """The annotations of an EKS gateway's LoadBalancer Service listening on `ports`: an NLB,
    internal (reached from the same VPC only) or internet-facing, with an idle timeout that fits
    the fleet's longest request on every listener."""
    idle = nlb_idle_timeout_seconds(fleet)
    out = {LB_TYPE_ANNOTATION: "nlb", LB_INTERNAL_ANNOTATION: "true" if internal else "false",
           LB_SCHEME_ANNOTATION: "internal" if internal else "internet-facing"}
    if internal:
        out[LB_TARGET_GROUP_ANNOTATION] = "preserve_client_ip.enabled=false"
    for port in ports:
        out[LB_LISTENER_ATTRIBUTES_ANNOTATION.format(port=port)] = f"tcp.idle_timeout.seconds={idle}"
    return out
