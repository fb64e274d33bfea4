"""Contract tests for the cloud sources: each rule EKS, EC2 or GKE enforces (or silently
gets wrong), named after the rule, its source in the docstring, asserted on what the real
program registers under Pulumi mocks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from modelplane.api import load_manifest_text
from modelplane.clouds.nvidia import DRA_KUBELET_PLUGIN_NODE_SELECTOR_TERMS, node_affinity_matches
from modelplane.storage import STORAGE_CLASSES
from tests.unit.render.cloudfleet import gpu_class

from .harness import EKS_AUTONAME, Run, run_program

PHYSICAL = "eks" + EKS_AUTONAME    # the EKS cluster's name as the (mocked) engine auto-names it

CLASSES = "---".join([
    gpu_class("p5", "EKS", "p5.48xlarge"),
    gpu_class("g5", "EKS", "g5.12xlarge", accelerator="nvidia-a10g", count=4, memory="22Gi"),
    gpu_class("a3-high", "GKE", "a3-highgpu-8g"),
    gpu_class("a3-ultra", "GKE", "a3-ultragpu-8g", accelerator="nvidia-h200-141gb", memory="143771Mi"),
])

EKS = CLASSES + """
---
apiVersion: modelplane.ai/v1alpha1
kind: InferenceCluster
metadata: {name: eks, labels: {modelplane.ai/region: a}}
spec:
  cluster: {source: EKS, eks: {region: us-east-1}}
  nodePools:
  - {name: efa, className: p5, nodeCount: 2, zones: [us-east-1a], fabric: {type: EFA}}
  - {name: block, className: p5, nodeCount: 1, zones: [us-east-1b], capacityBlock: {capacityReservationId: cr-0abc123}}
  - {name: plain, className: g5, nodeCount: 1, maxNodeCount: 3, zones: [us-east-1a, us-east-1b]}
"""

GKE = CLASSES + """
---
apiVersion: modelplane.ai/v1alpha1
kind: InferenceCluster
metadata: {name: gke, labels: {modelplane.ai/region: b}}
spec:
  cluster: {source: GKE, gke: {region: us-central1}}
  nodePools:
  - {name: high, className: a3-high, nodeCount: 4, zones: [us-central1-a, us-central1-b], fabric: {domain: d1}}
  - {name: ultra, className: a3-ultra, nodeCount: 2, maxNodeCount: 6, zones: [us-central1-b, us-central1-c],
     fabric: {domain: d2}}
"""
PROFILE = {"gcp": {"project": "p", "rdmaNetworkProfile": "projects/p/global/networkProfiles/x-vpc-roce",
                   "rdmaNics": 8}}


def _run(tmp_path: Path, stack: str, manifests: str, config: dict[str, object] | None = None) -> Run:
    (tmp_path / "fleet.yaml").write_text(manifests)
    return run_program(stack, config={"manifests": str(tmp_path), **(config or {})})


@pytest.fixture(scope="module")
def eks(tmp_path_factory: pytest.TempPathFactory) -> Run:
    return _run(tmp_path_factory.mktemp("eks"), "aws", EKS)


@pytest.fixture(scope="module")
def gke(tmp_path_factory: pytest.TempPathFactory) -> Run:
    return _run(tmp_path_factory.mktemp("gke"), "gcp", GKE, PROFILE)


def _groups(run: Run) -> dict[str, dict]:
    return {r.name: r.inputs for r in run.of_type("aws:eks/nodeGroup:NodeGroup")}


def _subnets(run: Run) -> dict[str, dict]:
    return {f"{r.name}-id": r.inputs for r in run.of_type("aws:ec2/subnet:Subnet")}


def test_eks_managed_node_group_launch_template_must_not_set_subnet_id(eks: Run) -> None:
    """AWS::EKS::Nodegroup LaunchTemplateSpecification (CloudFormation reference) and EKS
    CreateNodegroup `subnets`: "If you specify launchTemplate, then don't specify SubnetId in your
    launch template, or the node group deployment will fail"."""
    templates = eks.of_type("aws:ec2/launchTemplate:LaunchTemplate")
    assert templates, "the EFA and capacity-block pools have launch templates"
    for lt in templates:
        assert "subnetId" not in lt.inputs
        for nic in lt.inputs.get("networkInterfaces", []):
            assert "subnetId" not in nic, lt.name


def test_eks_gpu_node_groups_run_in_private_subnets_that_reach_the_api_through_nat(eks: Run) -> None:
    """EC2 InstanceNetworkInterfaceSpecification: a public IPv4 address is only assigned when an
    instance launches with one network interface, so EFA nodes (32 interfaces on p5) in a public
    subnet could not reach the EKS endpoint; GPU nodes belong in private subnets with a NAT route."""
    subnets = _subnets(eks)
    nat_tables = {f"{r.name}-id" for r in eks.of_type("aws:ec2/routeTable:RouteTable")
                  if any("natGatewayId" in route for route in r.inputs.get("routes", []))}
    assert nat_tables and eks.of_type("aws:ec2/natGateway:NatGateway")
    associated = {a.inputs["subnetId"]: a.inputs["routeTableId"]
                  for a in eks.of_type("aws:ec2/routeTableAssociation:RouteTableAssociation")}
    for name, group in _groups(eks).items():
        for subnet_id in group["subnetIds"]:
            assert subnets[subnet_id]["mapPublicIpOnLaunch"] is False, name
            assert associated[subnet_id] in nat_tables, name


def test_efa_launch_template_puts_one_efa_interface_on_every_network_card(eks: Run) -> None:
    """EC2 user guide, "Maximize network bandwidth ... with multiple network cards": the primary
    interface is card 0 device 0; every other card's EFA-only interface is device index 0. A
    p5.48xlarge has 32 network cards."""
    nics = eks.named("eks-efa-lt").inputs["networkInterfaces"]
    assert [n["networkCardIndex"] for n in nics] == list(range(32))
    assert {n["deviceIndex"] for n in nics} == {0}
    assert nics[0]["interfaceType"] == "efa" and {n["interfaceType"] for n in nics[1:]} == {"efa-only"}
    group = eks.named("eks-efa-pg").inputs
    assert group["strategy"] == "cluster"


def test_eks_capacity_block_node_group_needs_a_launch_template_naming_the_instance_type(eks: Run) -> None:
    """EKS user guide, "Create a managed node group with Capacity Blocks for ML": such node groups
    can only be created with a launch template whose data sets InstanceMarketOptions MarketType
    capacity-block, the CapacityReservationId and the InstanceType; the launch-templates page: an
    instance type in the template means none in the node group."""
    group = _groups(eks)["eks-block"]
    assert group["capacityType"] == "CAPACITY_BLOCK" and "instanceTypes" not in group
    lt = eks.named("eks-block-lt").inputs
    assert group["launchTemplate"]["id"] == "eks-block-lt-id"
    assert lt["instanceType"] == "p5.48xlarge"
    assert lt["instanceMarketOptions"]["marketType"] == "capacity-block"
    target = lt["capacityReservationSpecification"]["capacityReservationTarget"]
    assert target["capacityReservationId"] == "cr-0abc123"
    assert "networkInterfaces" not in lt   # not an EFA pool: a plain template, no interfaces


def test_eks_gpu_node_groups_carry_the_labels_the_dra_kubelet_plugin_requires(eks: Run) -> None:
    """kubernetes-sigs/dra-driver-nvidia-gpu values.yaml `kubeletPlugin.affinity`: without an NFD
    NVIDIA label or nvidia.com/gpu.present=true no kubelet plugin runs and no GPU is allocatable."""
    for name, group in _groups(eks).items():
        if name == "eks-system":
            continue
        assert node_affinity_matches(DRA_KUBELET_PLUGIN_NODE_SELECTOR_TERMS, group["labels"]), name
        assert group["taints"] == [{"key": "nvidia.com/gpu", "value": "present", "effect": "NO_SCHEDULE"}]


def test_eks_cache_storage_class_is_efs_backed_by_a_file_system_reachable_from_every_node(eks: Run) -> None:
    """kubernetes-sigs/aws-efs-csi-driver (dynamic provisioning: provisioningMode efs-ap with the
    fileSystemId) and EKS "Use elastic file system storage with Amazon EFS": the driver runs as
    the aws-efs-csi-driver add-on whose controller (efs-csi-controller-sa) needs
    AmazonEFSCSIDriverPolicy, and nodes mount through a mount target in their subnet (NFS 2049)."""
    [sc] = [r.inputs for r in eks.of_type("kubernetes:storage.k8s.io/v1:StorageClass")]
    assert sc["metadata"]["name"] == STORAGE_CLASSES["EKS"]
    assert sc["provisioner"] == "efs.csi.aws.com" and sc["parameters"]["provisioningMode"] == "efs-ap"
    assert sc["parameters"]["fileSystemId"] == "eks-cache-id"
    private = {sid for sid, s in _subnets(eks).items() if s["mapPublicIpOnLaunch"] is False}
    targets = [t.inputs for t in eks.of_type("aws:efs/mountTarget:MountTarget")]
    assert {t["subnetId"] for t in targets} == private
    assert {t["fileSystemId"] for t in targets} == {"eks-cache-id"}
    nfs = eks.named("eks-nfs").inputs["ingress"][0]
    assert (nfs["fromPort"], nfs["toPort"], nfs["protocol"]) == (2049, 2049, "tcp")
    addon = eks.named("eks-efs-csi", "aws:eks/addon:Addon").inputs
    assert addon["addonName"] == "aws-efs-csi-driver"
    [assoc] = addon["podIdentityAssociations"]
    assert assoc["serviceAccount"] == "efs-csi-controller-sa" and assoc["roleArn"].endswith("eks-efs-csi")
    assert eks.named("eks-pod-identity").inputs["addonName"] == "eks-pod-identity-agent"
    policy = eks.named("eks-efs-csi-AmazonEFSCSIDriverPolicy").inputs["policyArn"]
    assert policy == "arn:aws:iam::aws:policy/service-role/AmazonEFSCSIDriverPolicy"


def test_eks_efa_pool_on_an_instance_type_without_efa_is_refused_at_preview(tmp_path: Path) -> None:
    """EFA interfaces exist only on the instance types that carry them (EC2 "Supported instance
    types" for EFA); a pool declaring EFA on another type would get no EFA and run over TCP."""
    bad = EKS.replace("{name: plain, className: g5, nodeCount: 1, maxNodeCount: 3, zones: [us-east-1a, us-east-1b]}",
                      "{name: plain, className: g5, nodeCount: 1, zones: [us-east-1a], fabric: {type: EFA}}"
                      ).replace("g5.12xlarge", "g5.2xlarge")  # no EFA on it (the device plugin chart's list)
    with pytest.raises(Exception, match=r"pool plain: fabric EFA on instance type 'g5.2xlarge'"):
        _run(tmp_path, "aws", bad)


def test_gke_dra_gpu_pools_disable_driver_install_and_the_default_device_plugin(gke: Run) -> None:
    """https://cloud.google.com/kubernetes-engine/docs/how-to/set-up-dra: "Disable automatic GPU
    driver installation: gpu-driver-version=disabled" and "add the
    gke-no-default-nvidia-gpu-device-plugin=true node label to the node pool"."""
    pools = {r.name: r.inputs for r in gke.of_type("gcp:container/nodePool:NodePool")}
    for name in ("gke-high", "gke-ultra"):
        config = pools[name]["nodeConfig"]
        driver = config["guestAccelerators"][0]["gpuDriverInstallationConfig"]["gpuDriverVersion"]
        assert driver == "INSTALLATION_DISABLED"
        assert config["labels"]["gke-no-default-nvidia-gpu-device-plugin"] == "true"
        assert node_affinity_matches(DRA_KUBELET_PLUGIN_NODE_SELECTOR_TERMS, config["labels"])


def test_gke_cache_storage_class_is_filestore_with_its_csi_driver_enabled(gke: Run) -> None:
    """https://cloud.google.com/filestore/docs/csi-driver: the Filestore CSI driver (an add-on the
    cluster must enable) provisions ReadWriteMany volumes on the cluster's VPC."""
    cluster = gke.named("gke", "gcp:container/cluster:Cluster").inputs
    assert cluster["addonsConfig"]["gcpFilestoreCsiDriverConfig"]["enabled"] is True
    [sc] = [r.inputs for r in gke.of_type("kubernetes:storage.k8s.io/v1:StorageClass")]
    assert sc["metadata"]["name"] == STORAGE_CLASSES["GKE"]
    assert sc["provisioner"] == "filestore.csi.storage.gke.io" and sc["parameters"]["network"] == "default"


def test_gke_node_counts_are_per_zone_so_pools_hold_what_the_scheduler_counted(gke: Run) -> None:
    """google_container_node_pool (pulumi_gcp container.NodePool): `node_count` is "the number of
    nodes per instance group" and `min/max_node_count` are per zone; only
    `total_min/max_node_count` count the whole pool. The scheduler counts nodeCount (or
    maxNodeCount) for the whole pool."""
    fleet = load_manifest_text(GKE)
    pools = {r.name: r.inputs for r in gke.of_type("gcp:container/nodePool:NodePool")}
    high, spec_high = pools["gke-high"], fleet.clusters["gke"].pool("high")
    assert spec_high is not None
    assert high["nodeCount"] * len(high["nodeLocations"]) == spec_high.declared_nodes == 4
    ultra, spec_ultra = pools["gke-ultra"], fleet.clusters["gke"].pool("ultra")
    assert spec_ultra is not None
    assert ultra["autoscaling"]["totalMaxNodeCount"] == spec_ultra.declared_nodes == 6
    assert "maxNodeCount" not in ultra["autoscaling"] and "nodeCount" not in ultra
    assert ultra["initialNodeCount"] * len(ultra["nodeLocations"]) == spec_ultra.node_count
    system = pools["gke-system"]
    assert len(system["nodeLocations"]) == 1 and system["autoscaling"]["totalMaxNodeCount"] == 2


def test_gke_a3_high_and_mega_pools_get_no_rdma_vpcs(gke: Run) -> None:
    """GoogleCloudPlatform/container-engine-accelerators gpudirect-tcpx/ and gpudirect-tcpxo/: A3
    High and Mega move GPU traffic with GPUDirect-TCPX(O) over gVNIC VPCs; RoCE RDMA VPCs are for
    A3 Ultra and A4 (gpudirect-rdma/). The TCPX pod wiring is not rendered, so the preview says so."""
    pools = {r.name: r.inputs for r in gke.of_type("gcp:container/nodePool:NodePool")}
    assert "networkConfig" not in pools["gke-high"]
    assert pools["gke-high"]["placementPolicy"]["type"] == "COMPACT"
    assert len(pools["gke-ultra"]["networkConfig"]["additionalNodeNetworkConfigs"]) == 8
    assert any("GPUDirect-TCPX" in w and "pool high" in w for w in gke.warnings())


def test_gke_pool_that_cannot_spread_its_node_count_over_its_zones_is_refused_at_preview(tmp_path: Path) -> None:
    """Per-zone node counts (above): 3 nodes over 2 zones is either 2 or 4, never the 3 counted."""
    bad = GKE.replace("nodeCount: 4, zones: [us-central1-a, us-central1-b]", "nodeCount: 3, zones: [us-central1-a, "
                      "us-central1-b]")
    with pytest.raises(Exception, match=r"pool high: nodeCount 3 cannot be spread evenly over 2 zones"):
        _run(tmp_path, "gcp", bad, PROFILE)


def test_eks_pools_that_can_grow_are_discoverable_and_resizable_by_the_cluster_autoscaler(eks: Run) -> None:
    """kubernetes/autoscaler cluster-autoscaler/cloudprovider/aws/README.md: "Without the tags, the
    Cluster Autoscaler will be unable to add new instances to the ASG" (Auto-Discovery Setup), it
    only adjusts the desired size within the group's min and max, and it needs the actions of the
    "Full Cluster Autoscaler Features Policy". The `plain` pool (nodeCount 1, maxNodeCount 3) gets
    the tags on its group, a 1..3 scaling config, and a Pod Identity role for the chart's service
    account; fixed pools get no tag."""
    from modelplane.clouds.aws import AUTOSCALER_NAMESPACE, AUTOSCALER_SERVICE_ACCOUNT, autoscaler_discovery_tags

    groups = _groups(eks)
    assert groups["eks-plain"]["scalingConfig"] == {"desiredSize": 1, "minSize": 1, "maxSize": 3}
    tags = {r.name: r.inputs["tag"] for r in eks.of_type("aws:autoscaling/tag:Tag")}
    assert {(t["key"], t["value"]) for n, t in tags.items() if n.startswith("eks-plain-")} == set(
        autoscaler_discovery_tags(PHYSICAL).items())
    assert not [n for n in tags if n.startswith(("eks-efa-", "eks-block-", "eks-system-"))]
    [association] = [r.inputs for r in eks.of_type("aws:eks/podIdentityAssociation:PodIdentityAssociation")
                     if r.name == "eks-autoscaler"]
    assert (association["namespace"], association["serviceAccount"]) == (AUTOSCALER_NAMESPACE,
                                                                          AUTOSCALER_SERVICE_ACCOUNT)
    policy = json.loads(eks.named("eks-autoscaler", "aws:iam/rolePolicy:RolePolicy").inputs["policy"])
    actions = {a for statement in policy["Statement"] for a in statement["Action"]}
    assert {"autoscaling:SetDesiredCapacity", "autoscaling:TerminateInstanceInAutoScalingGroup",
            "autoscaling:DescribeAutoScalingGroups", "eks:DescribeNodegroup"} <= actions
    charts = {r.name: r.inputs for r in eks.of_type("kubernetes:helm.sh/v4:Chart")}
    autoscaler = next(c for n, c in charts.items() if n.endswith("-cluster-autoscaler"))
    assert autoscaler["namespace"] == AUTOSCALER_NAMESPACE
    assert autoscaler["values"]["autoDiscovery"]["clusterName"] == PHYSICAL


def test_cluster_autoscaler_discovers_node_groups_by_the_physical_eks_cluster_name(eks: Run) -> None:
    """kubernetes/autoscaler cluster-autoscaler/cloudprovider/aws/README.md "Auto-Discovery Setup":
    `--node-group-auto-discovery=asg:tag=k8s.io/cluster-autoscaler/enabled,k8s.io/cluster-autoscaler/
    <cluster-name>` resizes every Auto Scaling group of the account and region carrying both tags.
    Pulumi auto-names the EKS cluster `<name>-<suffix>` per stack; with the logical name two stacks
    declaring InferenceCluster `eks` in one region would resize each other's groups. Both the
    tags and the chart's autoDiscovery.clusterName carry the physical name (issue 27 item 6)."""
    from modelplane.clouds.aws import AUTOSCALER_ENABLED_TAG, autoscaler_cluster_tag

    assert eks.named("eks", "aws:eks/cluster:Cluster") and eks.state["eks"]["name"] == PHYSICAL != "eks"
    keys = {r.inputs["tag"]["key"] for r in eks.of_type("aws:autoscaling/tag:Tag")}
    assert keys == {AUTOSCALER_ENABLED_TAG, autoscaler_cluster_tag(PHYSICAL)}
    assert autoscaler_cluster_tag("eks") not in keys
    [chart] = [r for r in eks.of_type("kubernetes:helm.sh/v4:Chart") if r.name.endswith("-cluster-autoscaler")]
    assert chart.inputs["values"]["autoDiscovery"]["clusterName"] == PHYSICAL


def test_cluster_autoscaler_chart_waits_for_its_pod_identity_association(eks: Run) -> None:
    """EKS API reference, CreatePodIdentityAssociation: "If a pod uses a service account that has
    an association, Amazon EKS sets environment variables in the containers of the pod": that
    happens when the pod is created ("Understand how EKS Pod Identity works": the agent serves the
    credentials those variables point at). A cluster-autoscaler pod created before the association
    runs with the node role, is denied autoscaling:DescribeAutoScalingGroups and never recovers by
    restarting its container (issue 27 item 1). The chart depends on the association, which comes
    after the Pod Identity agent add-on; no other chart waits for it."""
    association = eks.named("eks-autoscaler", "aws:eks/podIdentityAssociation:PodIdentityAssociation")
    agent = eks.named("eks-pod-identity", "aws:eks/addon:Addon")
    assert agent.urn in association.dependencies
    charts = {r.name: r for r in eks.of_type("kubernetes:helm.sh/v4:Chart")}
    [autoscaler] = [c for n, c in charts.items() if n.endswith("-cluster-autoscaler")]
    assert association.urn in autoscaler.dependencies
    assert [n for n, c in charts.items() if association.urn in c.dependencies] == [autoscaler.name]


def test_gke_pools_that_can_grow_autoscale_within_the_bounds_the_fleet_declares(gke: Run) -> None:
    """google_container_node_pool autoscaling `total_min_node_count`/`total_max_node_count`
    ("Minimum/Maximum number of all nodes in the node pool", pulumi_gcp container.NodePool): GKE's
    own autoscaler grows the pool, so no chart is needed; its bounds are the fleet's."""
    fleet = load_manifest_text(GKE)
    pools = {r.name: r.inputs for r in gke.of_type("gcp:container/nodePool:NodePool")}
    spec = fleet.clusters["gke"].pool("ultra")
    assert spec is not None
    assert pools["gke-ultra"]["autoscaling"]["totalMaxNodeCount"] == spec.max_node_count == 6
    assert pools["gke-ultra"]["autoscaling"]["totalMinNodeCount"] == (spec.min_node_count or 0)
    assert "autoscaling" not in pools["gke-high"]       # fixed: nodeCount per zone
    assert not [r for r in gke.of_type("kubernetes:helm.sh/v4:Chart") if r.name.endswith("cluster-autoscaler")]
