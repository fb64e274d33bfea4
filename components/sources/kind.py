"""Kind: local clusters created by the program with `kind`, for the laptop stack.

Pool labels are set through kind's own node config, so every worker boots with
`modelplane.ai/pool=<pool>` before anything is scheduled. DRA is GA and on by default
from Kubernetes 1.34, and containerd 2 (in kindest/node 1.35) has CDI on, so no
feature gates or containerd patches are needed.

A changed node image or node list needs a new cluster (kind cannot edit one in place), and kind
refuses to create a cluster whose name still has nodes ("node(s) already exist for a cluster with
the name", kubernetes-sigs/kind pkg/cluster/internal/create/create.go `alreadyExists`). So the
cluster is replaced delete-first, and create first deletes whatever a failed or partial create
left under the name (`kind delete cluster` of an absent cluster succeeds: it lists no nodes,
pkg/cluster/internal/delete/delete.go). The cluster's identity (name + the hash of what created
it) is its Kubernetes provider's `clusterIdentifier`, so a recreated cluster gets every object
created again instead of assumed to exist.
"""

from __future__ import annotations

import hashlib
import shlex
import subprocess
from dataclasses import dataclass
from datetime import datetime

import pulumi
import pulumi_command as command
import yaml

from modelplane.render.gateway import CONTROL_NODE_PORT
from modelplane.vocabulary import LABEL_POOL, Manifest


def kind_config(name: str, pools: list[tuple[str, int]], host_port: int | None = None) -> Manifest:
    """A kind cluster config: one control-plane node plus one worker per pool node.
    With no pool nodes the control plane is the only node and carries no label.
    `host_port` publishes the gateway's NodePort on 127.0.0.1 of the host."""
    control: Manifest = {"role": "control-plane"}
    if host_port:
        control["extraPortMappings"] = [{"containerPort": CONTROL_NODE_PORT, "hostPort": host_port,
                                         "listenAddress": "127.0.0.1"}]
    nodes: list[Manifest] = [control]
    for pool, count in pools:
        nodes.extend({"role": "worker", "labels": {LABEL_POOL: pool}} for _ in range(count))
    return {"kind": "Cluster", "apiVersion": "kind.x-k8s.io/v1alpha4", "name": name, "nodes": nodes}


# kind labels every node container with its cluster's name
# (kubernetes-sigs/kind pkg/cluster/internal/providers/docker/constants.go `clusterLabelKey`).
KIND_CLUSTER_LABEL = "io.x-k8s.kind.cluster"
# kind creates a node container and starts it at once; a start this long after the creation is a
# restart (Docker, the laptop).
RESTART_AFTER_S = 120
DOCKER_TIMEOUT_S = 10
STALE_CDI = (
    "dra-example-driver 0.4.0 writes its CDI specs under /var/run/cdi, which is a tmpfs in a kind node "
    "(kind mounts --tmpfs /run, pkg/cluster/internal/providers/docker/provision.go; the chart's CDI_ROOT, "
    "deployments/helm/dra-example-driver/templates/kubeletplugin.yaml), and after a restart it restores "
    "prepared claims from its checkpoint without writing them again (cmd/dra-example-kubeletplugin/state.go "
    "Prepare; kubernetes/kubernetes#141433; no release fixes it yet), so engine pods holding fake GPUs stick in "
    "CreateContainerError (\"unresolvable CDI devices\"). Fix: delete those pods (their claims are recreated and "
    "prepared afresh): kubectl --context kind-{name} get pods -A | grep CreateContainerError, then kubectl "
    "--context kind-{name} delete pod -n <namespace> <pod>; or recreate the cluster with "
    "`pulumi up --replace <urn of {name}-kind>`")


def _docker_time(text: str) -> datetime | None:
    """Docker's RFC 3339 times, nanoseconds cut to what Python parses."""
    head, _, rest = text.strip().partition(".")
    zone = rest.lstrip("0123456789") if rest else text.strip()[19:]
    try:
        return datetime.fromisoformat(head + (zone.replace("Z", "+00:00") or "+00:00"))
    except ValueError:
        return None


def restarted_nodes(name: str) -> list[str]:
    """The kind cluster's node containers that were started again after they were created (a
    Docker or laptop restart); empty when Docker cannot say."""
    try:
        ids = subprocess.run(["docker", "ps", "-q", "--filter", f"label={KIND_CLUSTER_LABEL}={name}"],
                             capture_output=True, text=True, timeout=DOCKER_TIMEOUT_S, check=False).stdout.split()
        if not ids:
            return []
        lines = subprocess.run(["docker", "inspect", "-f", "{{.Name}} {{.Created}} {{.State.StartedAt}}", *ids],
                               capture_output=True, text=True, timeout=DOCKER_TIMEOUT_S, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    restarted = []
    for line in lines.splitlines():
        parts = line.split()
        if len(parts) != 3:
            continue
        created, started = _docker_time(parts[1]), _docker_time(parts[2])
        if created and started and (started - created).total_seconds() > RESTART_AFTER_S:
            restarted.append(parts[0].lstrip("/"))
    return sorted(restarted)


def restart_warning(name: str) -> str | None:
    """What to say when a kind cluster's nodes were restarted since they were created."""
    nodes = restarted_nodes(name)
    if not nodes:
        return None
    return (f"kind cluster {name}: node(s) {', '.join(nodes)} were restarted since they were created. "
            + STALE_CDI.format(name=name))


@dataclass(frozen=True)
class KindCluster:
    command: command.local.Command     # stdout: the kubeconfig (a secret)
    identity: str                      # changes whenever the cluster is recreated


def kind_commands(name: str, node_image: str) -> tuple[str, str]:
    """(create, delete) shell commands: create removes leftovers of a failed create first."""
    quoted = shlex.quote(name)
    delete = f"kind delete cluster --name {quoted}"
    create = (f"{delete} >&2 && kind create cluster --name {quoted} --image {shlex.quote(node_image)} "
              f"--config - --wait 180s >&2 && kind get kubeconfig --name {quoted}")
    return create, delete


def kind_cluster(name: str, node_image: str, pools: list[tuple[str, int]],
                 parent: pulumi.Resource, *, host_port: int | None = None) -> KindCluster:
    """`kind create cluster`, replaced delete-first when what it is created from changes."""
    config = yaml.safe_dump(kind_config(name, pools, host_port), sort_keys=False)
    create, delete = kind_commands(name, node_image)
    trigger = hashlib.sha256(f"{node_image}\n{config}".encode()).hexdigest()
    cmd = command.local.Command(
        f"{name}-kind",
        create=create,
        delete=delete,
        stdin=config,
        # A changed node list or image needs a new cluster; kind cannot edit one in place.
        triggers=[trigger],
        opts=pulumi.ResourceOptions(parent=parent, additional_secret_outputs=["stdout"],
                                    # the old cluster holds the name until it is deleted
                                    delete_before_replace=True),
    )
    return KindCluster(cmd, f"{name}@kind-{trigger[:12]}")
