"""Stack config -> FleetArgs (the only place that reads pulumi.Config). Unset keys take
the defaults of the args dataclasses, so each default lives in one place."""

from __future__ import annotations

import os
from collections.abc import Mapping

import pulumi

from components.args import (
    FLEET_ROLE,
    SHARD_ROLE,
    AwsArgs,
    ClusterAccess,
    ControlPlaneArgs,
    FleetArgs,
    GcpArgs,
    SimArgs,
    SplitArgs,
)
from components.observe import observe_args
from modelplane.api import ManifestError, load_manifests
from modelplane.json_types import JsonMapping, JsonObject

AWS_KEYS = {"vpcCidr": "vpc_cidr", "clusterRoleArn": "cluster_role_arn", "nodeRoleArn": "node_role_arn",
            "systemInstanceType": "system_instance_type"}
GCP_KEYS = {"project": "project", "network": "network", "subnetwork": "subnetwork",
            "rdmaNetworkProfile": "rdma_network_profile", "rdmaNics": "rdma_nics",
            "systemMachineType": "system_machine_type"}
CONTROL_KEYS = {"name": "name", "source": "source", "nodeImage": "node_image"}
SIM_KEYS = {"stateDir": "state_dir", "awaitTimeoutSeconds": "await_timeout_s"}
SPLIT_KEYS = {"role": "role", "shardSize": "shard_size", "fleetStack": "fleet_stack", "shard": "shard"}
DRIVER_SPLIT_KEYS = {"fromConfig"}   # the driver's bookkeeping in a shard stack's split block
# Set by `python -m modelplane preview` (modelplane/commands/stacks.py): where the fleet
# stack writes every share of the placement it previews and shard stacks read theirs.
SHARES_FILE_ENV = "MODELPLANE_SHARES_FILE"


def _given(block: JsonMapping, keys: Mapping[str, str]) -> JsonObject:
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
    sim = sim_args(config.get_object("sim"), manifests)
    access = {}
    for name in sorted(set(clusters) | set(fleet.clusters)):
        block = clusters.get(name) or {}
        access[name] = ClusterAccess(
            kubeconfig=pulumi.Output.secret(kubeconfigs[name]) if kubeconfigs.get(name) else None,
            kubeconfig_path=_path(block.get("kubeconfigPath")), context=block.get("context"), sim=sim)
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
            access=ClusterAccess(kubeconfig_path=_path(cp.get("kubeconfigPath")), context=cp.get("context"),
                                 sim=sim)),
        access=access,
        aws=AwsArgs(**_given(config.get_object("aws") or {}, AWS_KEYS)),
        gcp=GcpArgs(**gcp),
        hf_token=config.get_secret("hfToken"),
        endpoint_api_keys=config.get_secret_object("endpointApiKeys"),
        gateway_api_keys=config.get_secret_object("gatewayApiKeys"),
        sim=sim,
        observe=observe,
        autoscale=config.get_object("autoscale") or None,
    )
    split = config.get_object("split")
    if split:
        args.split = split_args(split)
    if config.get("accounting"):
        args.accounting = config.require("accounting")
    if config.get("installCharts") is not None:
        args.install_charts = bool(config.get_bool("installCharts"))
    if sim is not None and (args.install_charts or args.render_dir):
        raise pulumi.RunError("stack config sim: the simulated clusters run LeaderWorkerSet and publish the GPU "
                              "drivers' devices themselves, and the charts cannot be pulled here; set "
                              "`installCharts: false` and no renderDir in the sim stack (stacks/Pulumi.sim.yaml)")
    return args


def split_args(block: JsonMapping) -> SplitArgs:
    """The `split` config block; a clean error naming the key when it is malformed."""
    unknown = sorted(set(block) - set(SPLIT_KEYS) - DRIVER_SPLIT_KEYS)
    if unknown:
        raise pulumi.RunError(f"stack config split: unknown key(s) {', '.join(unknown)}; "
                              f"known: {', '.join(SPLIT_KEYS)}")
    given = _given(block, SPLIT_KEYS)
    role = given.get("role")
    if role not in (FLEET_ROLE, SHARD_ROLE):
        raise pulumi.RunError(f"stack config split.role must be {FLEET_ROLE} or {SHARD_ROLE}, not {role!r}")
    try:
        given["shard_size"] = int(given.get("shard_size", 1))
    except (TypeError, ValueError):
        raise pulumi.RunError(f"stack config split.shardSize must be an integer, not {block.get('shardSize')!r}") \
            from None
    if given["shard_size"] < 1:
        raise pulumi.RunError("stack config split.shardSize must be at least 1")
    if role == SHARD_ROLE and not (given.get("fleet_stack") and given.get("shard")):
        raise pulumi.RunError("a shard stack needs stack config split.fleetStack (the fleet stack's name) "
                              "and split.shard (which shard it applies)")
    return SplitArgs(**given, shares_file=os.environ.get(SHARES_FILE_ENV) or None,
                     from_config=str(block.get("fromConfig") or ""))


def sim_args(block: JsonMapping | None, manifests: str) -> SimArgs | None:
    """The `sim` config block (the sim stack): None when absent; a clean error naming a bad key."""
    if block is None:
        return None
    if not isinstance(block, Mapping):
        raise pulumi.RunError("stack config sim must be an object, e.g. `sim: {stateDir: .modelplane/sim}`")
    unknown = sorted(set(block) - set(SIM_KEYS))
    if unknown:
        raise pulumi.RunError(f"stack config sim: unknown key(s) {', '.join(unknown)}; known: {', '.join(SIM_KEYS)}")
    given = _given(block, SIM_KEYS)
    if "state_dir" in given:
        given["state_dir"] = _path(str(given["state_dir"]))
    if "await_timeout_s" in given:
        try:
            given["await_timeout_s"] = int(given["await_timeout_s"])
        except (TypeError, ValueError):
            given["await_timeout_s"] = 0
        if given["await_timeout_s"] <= 0:
            raise pulumi.RunError(f"stack config sim.awaitTimeoutSeconds must be a positive number of seconds, "
                                  f"not {block['awaitTimeoutSeconds']!r}")
    return SimArgs(**given, manifests=manifests)
