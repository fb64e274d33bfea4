"""Typed arguments of the fleet: what __main__ reads from stack config, and what a user
who prefers code to YAML passes directly (see docs/pulumi-program.md)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

import pulumi

DEFAULT_KIND_NODE_IMAGE = "kindest/node:v1.35.1"
# kubelet 1.34.0 and 1.34.1 deadlock DRA after ~30 idle minutes (k8s-api-shapes §1.9).
BAD_KIND_IMAGES = ("v1.34.0", "v1.34.1")


@dataclass
class ClusterAccess:
    """How to reach a cluster the program does not create. `kubeconfig` is the file's
    contents (keep it a secret) or, when `kubeconfig_path` is set, read from that path."""

    kubeconfig: pulumi.Input[str] | None = None
    kubeconfig_path: str | None = None
    context: str | None = None


@dataclass
class ControlPlaneArgs:
    """Where the control-plane gateway runs when no InferenceGateway names a fleet cluster."""

    name: str = "control"
    source: str = "Kind"  # Kind | Existing
    node_image: str = DEFAULT_KIND_NODE_IMAGE
    access: ClusterAccess = field(default_factory=ClusterAccess)


@dataclass
class AwsArgs:
    vpc_cidr: str = "10.0.0.0/16"
    cluster_role_arn: str | None = None
    node_role_arn: str | None = None
    system_instance_type: str = "m6i.xlarge"


@dataclass
class GcpArgs:
    project: str | None = None
    network: str | None = None
    subnetwork: str | None = None
    # e.g. projects/<p>/global/networkProfiles/<zone>-vpc-roce: RDMA NICs for fabric pools
    rdma_network_profile: str | None = None
    rdma_nics: int = 8
    system_machine_type: str = "e2-standard-4"


@dataclass
class FleetArgs:
    fleet: Any  # modelplane.api.Fleet
    accounting: str = "Device"
    observed: Mapping[str, Mapping[str, int]] | None = None
    # GitOps: every cluster's provider writes YAML under <render_dir>/<cluster>.
    render_dir: str | None = None
    install_charts: bool = True
    control_plane: ControlPlaneArgs = field(default_factory=ControlPlaneArgs)
    access: Mapping[str, ClusterAccess] = field(default_factory=dict)
    aws: AwsArgs = field(default_factory=AwsArgs)
    gcp: GcpArgs = field(default_factory=GcpArgs)
    hf_token: pulumi.Input[str] | None = None
    # "<namespace>/<endpoint>" -> API key (a secret Output)
    endpoint_api_keys: pulumi.Input[Mapping[str, str]] | None = None
