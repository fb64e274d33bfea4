"""Typed arguments of the fleet: what __main__ reads from stack config, and what a user
who prefers code to YAML passes directly (see docs/pulumi-program.md)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import pulumi

from modelplane.api import Fleet
from modelplane.api.inference_cluster import DEFAULT_KIND_NODE_IMAGE
from modelplane.observe.health import DEFAULT_UNREACHABLE_GRACE_S, DEFAULT_UNREADY_GRACE_S
from modelplane.observe.read import DEFAULT_READ_TIMEOUT_S
from modelplane.plan import DEFAULT_CONTROL_PLANE
from modelplane.scheduler import DEFAULT_ACCOUNTING


@dataclass(kw_only=True)
class ClusterAccess:
    """How to reach a cluster the program does not create. `kubeconfig` is the file's
    contents (keep it a secret) or, when `kubeconfig_path` is set, read from that path."""

    kubeconfig: pulumi.Input[str] | None = None
    kubeconfig_path: str | None = None
    context: str | None = None


@dataclass(kw_only=True)
class ControlPlaneArgs:
    """Where the control-plane gateway runs when no InferenceGateway names a fleet cluster."""

    name: str = DEFAULT_CONTROL_PLANE
    source: str = "Kind"  # Kind | Existing
    node_image: str = DEFAULT_KIND_NODE_IMAGE
    access: ClusterAccess = field(default_factory=ClusterAccess)


@dataclass(kw_only=True)
class AwsArgs:
    vpc_cidr: str = "10.0.0.0/16"
    cluster_role_arn: str | None = None
    node_role_arn: str | None = None
    system_instance_type: str = "m6i.xlarge"


@dataclass(kw_only=True)
class GcpArgs:
    project: str | None = None
    network: str | None = None
    subnetwork: str | None = None
    # e.g. projects/<p>/global/networkProfiles/<zone>-vpc-roce: RDMA NICs for fabric pools
    rdma_network_profile: str | None = None
    rdma_nics: int = 8
    system_machine_type: str = "e2-standard-4"


@dataclass(kw_only=True)
class ObserveArgs:
    """Reading the clusters at preview (docs/observe.md): each cluster with a `kubeconfig_path`
    gets `timeout` seconds to answer; a cluster unreachable for `unreachable_grace` seconds, or
    whose replicas all stay unready for `unready_grace`, has its replicas re-placed elsewhere."""

    timeout: float = DEFAULT_READ_TIMEOUT_S
    unreachable_grace: float = DEFAULT_UNREACHABLE_GRACE_S
    unready_grace: float = DEFAULT_UNREADY_GRACE_S


@dataclass(kw_only=True)
class FleetArgs:
    fleet: Fleet
    accounting: str = DEFAULT_ACCOUNTING
    observed: Mapping[str, Mapping[str, int]] | None = None
    # GitOps: every cluster's provider writes YAML under <render_dir>/<cluster>; Secrets
    # are referenced, never written (docs/pulumi-program.md).
    render_dir: str | None = None
    install_charts: bool = True
    control_plane: ControlPlaneArgs = field(default_factory=ControlPlaneArgs)
    access: Mapping[str, ClusterAccess] = field(default_factory=dict)
    aws: AwsArgs = field(default_factory=AwsArgs)
    gcp: GcpArgs = field(default_factory=GcpArgs)
    # None: place on declared sizes only, even where a kubeconfig path is known
    observe: ObserveArgs | None = field(default_factory=ObserveArgs)
    hf_token: pulumi.Input[str] | None = None
    # "<namespace>/<credential Secret name>" -> API key (a secret Output)
    endpoint_api_keys: pulumi.Input[Mapping[str, str]] | None = None
