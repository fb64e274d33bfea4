"""The `sim` stack's cluster access and how its objects are awaited (docs/sim.md).

Every InferenceCluster, whatever its source, is reached as an existing cluster through the
kubeconfig `python -m modelplane sim up` wrote; the program checks that the simulated cluster
runs before the Kubernetes provider is asked to reach it, so a stopped sim fails the preview at
once, naming the cluster and the command that starts it.

The objects are the ones every other stack applies. Only how Pulumi waits for them differs, in
one resource transformation: a simulated cluster has no load-balancer controller and no storage
provisioner, so a LoadBalancer Service never gets an address and a PersistentVolumeClaim stays
Pending (and so do the pods that mount one); the provider would wait for them for ten minutes
or, for the workloads, an hour. Those objects are applied without waiting (`pulumi.com/skipAwait`,
and a warning for each workload that is not awaited), and every other workload must become ready
within `SimArgs.await_timeout_s`, so a pod the real kube-scheduler cannot place fails `pulumi up`
in minutes with the provider's reason instead of hanging.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pulumi

from components.args import SimArgs
from modelplane.json_types import JsonMapping, JsonObject
from sim import KubeClient, SimError, SimFleet

SKIP_AWAIT = "pulumi.com/skipAwait"
# Seconds the readiness probe of a simulated API server may take before the cluster counts as down.
PROBE_TIMEOUT_S = 5.0
# The provider's per-request client timeout on the sim: an API server that stops answering fails
# the operation instead of holding it forever (watches are re-established after it).
CLIENT_TIMEOUT_S = 60
WORKLOAD_KINDS = ("Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job")


class SimUnavailable(Exception):
    """A simulated cluster the stack needs does not run; the message says what to do."""


class SimClusterDown(SimUnavailable):
    """The sim started this cluster and it stopped answering (an API server killed, a process
    gone): an unreachable cluster (docs/observe.md), still named by its kubeconfig."""

    def __init__(self, message: str, cluster: SimCluster) -> None:
        super().__init__(message)
        self.cluster = cluster


@dataclass(frozen=True)
class SimCluster:
    """A running simulated cluster: its kubeconfig and when its sim started."""

    kubeconfig: str
    started_at: str

    def identifier(self, name: str) -> str:
        """The provider's cluster identity: a restarted sim is a new, empty cluster, so the objects
        of the previous one are created again rather than assumed to exist."""
        return f"{name}@sim-{self.started_at}"


def simulated_cluster(name: str, sim: SimArgs) -> SimCluster:
    """The running simulated cluster `name`, or SimUnavailable saying how to start it."""
    directory = Path(sim.state_dir)
    start = (f"start the fleet's simulated clusters with `python -m modelplane sim up "
             f"{sim.manifests or 'MANIFEST_DIR'} --state-dir {directory}`")
    try:
        rows = {row.name: row for row in SimFleet(directory).status()}
    except SimError as exc:
        raise SimUnavailable(f"its simulated cluster cannot be read: {exc}") from None
    if not rows:
        raise SimUnavailable(f"no simulated clusters run from {directory}; {start}, then run this again")
    row = rows.get(name)
    if row is None:
        raise SimUnavailable(
            f"the simulated clusters in {directory} ({', '.join(sorted(rows))}) were started from another fleet; "
            f"stop them with `python -m modelplane sim down --state-dir {directory}`, then {start}")
    restart = (f"restart them with `python -m modelplane sim down --state-dir {directory}` and then {start} "
               "(a restarted sim is empty: this stack creates its objects again)")
    found = SimCluster(str(row.kubeconfig), row.started_at)
    if not row.running:
        down = ", ".join(p for p, alive in row.processes.items() if not alive) or "its processes"
        raise SimClusterDown(f"its simulated cluster is not running ({down} stopped); {restart}", found)
    try:
        with KubeClient.from_kubeconfig(row.kubeconfig, timeout=PROBE_TIMEOUT_S) as kube:
            ready = kube.request("GET", "/readyz").status_code == 200
    except Exception as exc:  # noqa: BLE001 - whatever stops us reaching it (a torn kubeconfig too) means it is down
        raise SimClusterDown(f"its simulated API server at {row.server} does not answer ({exc}); {restart}",
                             found) from None
    if not ready:
        raise SimClusterDown(f"its simulated API server at {row.server} is not ready; {restart}", found)
    return found


def _skip_await(props: JsonMapping) -> JsonObject | None:
    """`props` with the skipAwait annotation, or None when its metadata is not a plain dict."""
    meta = props.get("metadata")
    if not isinstance(meta, Mapping):
        return None
    annotations = dict(meta.get("annotations") or {})
    annotations[SKIP_AWAIT] = "true"
    return {**props, "metadata": {**meta, "annotations": annotations}}


def _claims_mounted(props: JsonMapping) -> list[str]:
    """The PersistentVolumeClaims a workload's pod template mounts."""
    spec = props.get("spec")
    template = spec.get("template") if isinstance(spec, Mapping) else None
    pod = template.get("spec") if isinstance(template, Mapping) else None
    volumes = pod.get("volumes") if isinstance(pod, Mapping) else None
    return [str(v["persistentVolumeClaim"].get("claimName")) for v in volumes or []
            if isinstance(v, Mapping) and isinstance(v.get("persistentVolumeClaim"), Mapping)]


def await_rule(kind: str, props: JsonMapping) -> tuple[bool, str]:
    """(wait for it?, why not) for one Kubernetes object on a simulated cluster."""
    if kind == "Service":
        spec = props.get("spec")
        if isinstance(spec, Mapping) and spec.get("type") == "LoadBalancer":
            return False, "a LoadBalancer Service never gets an address on the sim (no load-balancer controller)"
    if kind == "PersistentVolumeClaim":
        return False, "a PersistentVolumeClaim stays Pending on the sim (no storage provisioner)"
    if kind in WORKLOAD_KINDS:
        claims = _claims_mounted(props)
        if claims:
            return False, (f"its pods mount PersistentVolumeClaim(s) {', '.join(claims)}, which stay Pending on the "
                           "sim (no storage provisioner), so they cannot be scheduled")
    return True, ""


def await_transformation(sim: SimArgs) -> pulumi.ResourceTransformation:
    """The sim's await rule for every Kubernetes object the fleet registers (module docstring)."""
    timeouts = pulumi.CustomTimeouts(create=f"{sim.await_timeout_s}s", update=f"{sim.await_timeout_s}s")

    def transform(args: pulumi.ResourceTransformationArgs) -> pulumi.ResourceTransformationResult | None:
        if not args.type_.startswith("kubernetes:") or args.type_.startswith("kubernetes:helm"):
            return None
        kind = args.type_.rsplit(":", 1)[-1]
        wait, why = await_rule(kind, args.props)
        if not wait:
            props = _skip_await(args.props)
            if props is None:
                return None
            if kind in WORKLOAD_KINDS:
                pulumi.log.warn(f"sim: {kind} {args.name} is applied but not awaited: {why}", args.resource)
            return pulumi.ResourceTransformationResult(props, args.opts)
        if kind in WORKLOAD_KINDS:
            return pulumi.ResourceTransformationResult(
                args.props, pulumi.ResourceOptions.merge(args.opts, pulumi.ResourceOptions(custom_timeouts=timeouts)))
        return None

    return transform


def sim_options(sim: SimArgs | None, opts: pulumi.ResourceOptions | None) -> pulumi.ResourceOptions | None:
    """The root component's options on the sim stack: the await rule for everything under it."""
    if sim is None:
        return opts
    return pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(transformations=[await_transformation(sim)]))
