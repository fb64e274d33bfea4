"""Stack config -> FleetArgs (the only place that reads pulumi.Config)."""

from __future__ import annotations

import os
import pulumi

from components.args import AwsArgs, ClusterAccess, ControlPlaneArgs, FleetArgs, GcpArgs, DEFAULT_KIND_NODE_IMAGE


def fleet_args_from_config(project_dir: str, config: pulumi.Config | None = None) -> FleetArgs:
    from modelplane.api import load_manifests

    config = config or pulumi.Config()
    manifests = config.require("manifests")
    fleet = load_manifests(os.path.join(project_dir, manifests))
    # Kept as written: providers run in the project directory, and a relative path keeps
    # the provider config (and so the state) the same in every checkout.
    render_dir = config.get("renderDir") or None
    cp = config.get_object("controlPlane") or {}
    clusters = config.get_object("clusters") or {}
    # Which clusters have a kubeconfig decides which provider gets one, so the names are
    # read as plain config; every value is wrapped as a secret before any resource sees it.
    kubeconfigs = config.get_object("kubeconfigs") or {}
    access = {}
    for name in sorted(set(clusters) | set(fleet.clusters)):
        block = clusters.get(name) or {}
        path = block.get("kubeconfigPath")
        access[name] = ClusterAccess(
            kubeconfig=pulumi.Output.secret(kubeconfigs[name]) if kubeconfigs.get(name) else None,
            kubeconfig_path=os.path.expanduser(path) if path else None, context=block.get("context"))
    aws, gcp = config.get_object("aws") or {}, config.get_object("gcp") or {}
    return FleetArgs(
        fleet=fleet,
        accounting=config.get("accounting") or "Device",
        observed=config.get_object("observed") or None,
        render_dir=render_dir,
        install_charts=config.get_bool("installCharts") if config.get("installCharts") is not None else True,
        control_plane=ControlPlaneArgs(
            name=cp.get("name", "control"), source=cp.get("source", "Kind"),
            node_image=cp.get("nodeImage", DEFAULT_KIND_NODE_IMAGE),
            access=ClusterAccess(kubeconfig_path=os.path.expanduser(cp["kubeconfigPath"]) if cp.get("kubeconfigPath") else None,
                                 context=cp.get("context"))),
        access=access,
        aws=AwsArgs(vpc_cidr=aws.get("vpcCidr", "10.0.0.0/16"), cluster_role_arn=aws.get("clusterRoleArn"),
                    node_role_arn=aws.get("nodeRoleArn"),
                    system_instance_type=aws.get("systemInstanceType", "m6i.xlarge")),
        gcp=GcpArgs(project=gcp.get("project"), network=gcp.get("network"), subnetwork=gcp.get("subnetwork"),
                    rdma_network_profile=gcp.get("rdmaNetworkProfile"), rdma_nics=int(gcp.get("rdmaNics", 8)),
                    system_machine_type=gcp.get("systemMachineType", "e2-standard-4")),
        hf_token=config.get_secret("hfToken"),
        endpoint_api_keys=config.get_secret_object("endpointApiKeys"),
    )

