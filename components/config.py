"""Stack config -> FleetArgs (the only place that reads pulumi.Config). Unset keys take
the defaults of the args dataclasses, so each default lives in one place."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import pulumi

from components.args import AwsArgs, ClusterAccess, ControlPlaneArgs, FleetArgs, GcpArgs
from components.observe import observe_args
from modelplane.api import ManifestError, load_manifests

AWS_KEYS = {"vpcCidr": "vpc_cidr", "clusterRoleArn": "cluster_role_arn", "nodeRoleArn": "node_role_arn",
            "systemInstanceType": "system_instance_type"}
GCP_KEYS = {"project": "project", "network": "network", "subnetwork": "subnetwork",
            "rdmaNetworkProfile": "rdma_network_profile", "rdmaNics": "rdma_nics",
            "systemMachineType": "system_machine_type"}
CONTROL_KEYS = {"name": "name", "source": "source", "nodeImage": "node_image"}


def _given(block: Mapping[str, Any], keys: Mapping[str, str]) -> dict[str, Any]:
    """The config keys that are set, renamed to the dataclass field names."""
    return {field: block[key] for key, field in keys.items() if block.get(key) is not None}


def _path(value: str | None) -> str | None:
    return os.path.expanduser(value) if value else None


def fleet_args_from_config(project_dir: str, config: pulumi.Config | None = None) -> FleetArgs:
    config = config or pulumi.Config()
    manifests = config.require("manifests")
    try:
        fleet = load_manifests(os.path.join(project_dir, manifests))
    except ManifestError as exc:
        # A clean error naming each file, document and field, not a traceback.
        raise pulumi.RunError(f"invalid manifests in {manifests}:\n{exc}") from None
    except (OSError, ValueError) as exc:
        raise pulumi.RunError(f"cannot read the manifests {manifests}: {exc}") from None
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
        access[name] = ClusterAccess(
            kubeconfig=pulumi.Output.secret(kubeconfigs[name]) if kubeconfigs.get(name) else None,
            kubeconfig_path=_path(block.get("kubeconfigPath")), context=block.get("context"))
    try:
        observe = observe_args(config.get_object("observe"))
    except ValueError as exc:
        raise pulumi.RunError(str(exc)) from None
    gcp = _given(config.get_object("gcp") or {}, GCP_KEYS)
    if "rdma_nics" in gcp:
        gcp["rdma_nics"] = int(gcp["rdma_nics"])
    args = FleetArgs(
        fleet=fleet,
        observed=config.get_object("observed") or None,
        render_dir=render_dir,
        control_plane=ControlPlaneArgs(
            **_given(cp, CONTROL_KEYS),
            access=ClusterAccess(kubeconfig_path=_path(cp.get("kubeconfigPath")), context=cp.get("context"))),
        access=access,
        aws=AwsArgs(**_given(config.get_object("aws") or {}, AWS_KEYS)),
        gcp=GcpArgs(**gcp),
        hf_token=config.get_secret("hfToken"),
        endpoint_api_keys=config.get_secret_object("endpointApiKeys"),
        observe=observe,
    )
    if config.get("accounting"):
        args.accounting = config.require("accounting")
    if config.get("installCharts") is not None:
        args.install_charts = bool(config.get_bool("installCharts"))
    return args
