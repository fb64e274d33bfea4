"""Typed arguments of the fleet: what __main__ reads from stack config, and what a user
who prefers code to YAML passes directly (see docs/pulumi-program.md)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import pulumi

from modelplane.api import Fleet
from modelplane.api.inference_cluster import DEFAULT_KIND_NODE_IMAGE
from modelplane.clouds.aws import SYSTEM_INSTANCE_TYPE
from modelplane.clouds.gcp import SYSTEM_MACHINE_TYPE
from modelplane.observe import DEFAULT_READ_TIMEOUT_S
from modelplane.observe.health import DEFAULT_UNREACHABLE_GRACE_S, DEFAULT_UNREADY_GRACE_S
from modelplane.observe.verify import DEFAULT_VERIFY_WAIT_S
from modelplane.plan import DEFAULT_CONTROL_PLANE
from modelplane.scheduler import DEFAULT_ACCOUNTING
from sim import DEFAULT_STATE_DIR


@dataclass(kw_only=True)
class SimArgs:
    """The `sim` stack (docs/sim.md): every cluster, whatever its source, is the simulated one
    `python -m modelplane sim up` started, reached as an existing cluster through the kubeconfig
    the sim wrote in `state_dir`."""

    state_dir: str = DEFAULT_STATE_DIR      # absolute, or relative to the project directory
    manifests: str = ""                     # the fleet, for the `sim up` hint of a cluster that is down
    # How long a Deployment, StatefulSet or Job may take to become ready on the sim (kwok makes
    # pods Running in seconds; one that cannot be scheduled fails the update after this long).
    await_timeout_s: int = 120


@dataclass(kw_only=True)
class ClusterAccess:
    """How to reach a cluster the program does not create. `kubeconfig` is the file's
    contents (keep it a secret) or, when `kubeconfig_path` is set, read from that path;
    with `sim`, the cluster's simulated twin (whatever its source)."""

    kubeconfig: pulumi.Input[str] | None = None
    kubeconfig_path: str | None = None
    context: str | None = None
    sim: SimArgs | None = None


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
    system_instance_type: str = SYSTEM_INSTANCE_TYPE


@dataclass(kw_only=True)
class GcpArgs:
    project: str | None = None
    network: str | None = None
    subnetwork: str | None = None
    # e.g. projects/<p>/global/networkProfiles/<zone>-vpc-roce: RDMA NICs for fabric pools
    rdma_network_profile: str | None = None
    rdma_nics: int = 8
    system_machine_type: str = SYSTEM_MACHINE_TYPE


FLEET_ROLE = "fleet"
SHARD_ROLE = "shard"


@dataclass(kw_only=True)
class SplitArgs:
    """One stack of a fleet split across stacks (docs/pulumi-program.md, "Split stacks").
    The fleet stack (`role="fleet"`) places the fleet and exports every shard's share;
    a shard stack (`role="shard"`) applies the clusters of one shard from its share."""

    role: str                                # FLEET_ROLE or SHARD_ROLE
    shard_size: int = 1                      # clusters per shard stack; the same in every stack of a fleet
    fleet_stack: str = ""                    # shard: the fleet stack's name, for the StackReference
    shard: str = ""                          # shard: which shard this stack applies
    # A file with every share (`python -m modelplane preview`): the fleet stack writes the
    # shares of the placement it previews there, and shard stacks read theirs from it
    # instead of the fleet stack's last applied outputs.
    shares_file: str | None = None
    # shard: the digest of the fleet config this shard's config was made from (the driver's
    # `fromConfig`), exported in the shard's `applied` output
    from_config: str = ""


@dataclass(kw_only=True)
class ObserveArgs:
    """Reading the clusters at preview (docs/observe.md): each cluster with a `kubeconfig_path`
    gets `timeout` seconds to answer; a cluster unreachable for `unreachable_grace` seconds, or
    whose replicas all stay unready for `unready_grace`, has its replicas re-placed elsewhere.
    After `up`, every placed replica is verified on its cluster (the `verification` output)."""

    timeout: float = DEFAULT_READ_TIMEOUT_S
    unreachable_grace: float = DEFAULT_UNREACHABLE_GRACE_S
    unready_grace: float = DEFAULT_UNREADY_GRACE_S
    # after `up`, how long the `verification` output waits for the placed replicas to verify
    verify_wait: float = DEFAULT_VERIFY_WAIT_S


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
    # caller identity -> API key, for an InferenceGateway with spec.auth (a secret Output);
    # only their SHA-256 hashes reach the cluster (modelplane.plan.gateway.callers_secret_data)
    gateway_api_keys: pulumi.Input[Mapping[str, str]] | None = None
    # The `sim` stack: clusters reached through their simulated twins (each ClusterAccess.sim)
    sim: SimArgs | None = None
    # None: the whole fleet in this one stack
    split: SplitArgs | None = None
    # The ReplicaAutoscalers' loop (stack config `modelplane:autoscale`, docs/autoscaling.md):
    # metricsFile, prometheus per cluster, timeoutSeconds, drainSeconds, ...; used only when
    # the fleet has an autoscaler
    autoscale: Mapping[str, object] | None = None
