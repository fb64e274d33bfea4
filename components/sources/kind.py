"""Kind: local clusters created by the program with `kind`, for the laptop stack.

Pool labels are set through kind's own node config, so every worker boots with
`modelplane.ai/pool=<pool>` before anything is scheduled. DRA is GA and on by default
from Kubernetes 1.34, and containerd 2 (in kindest/node 1.35) has CDI on, so no
feature gates or containerd patches are needed.
"""

from __future__ import annotations

import hashlib
import shlex

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


def kind_cluster(name: str, node_image: str, pools: list[tuple[str, int]],
                 parent: pulumi.Resource, *, host_port: int | None = None) -> command.local.Command:
    """`kind create cluster`; the command's stdout is the kubeconfig (a secret)."""
    config = yaml.safe_dump(kind_config(name, pools, host_port), sort_keys=False)
    quoted = shlex.quote(name)
    create = (f"kind create cluster --name {quoted} --image {shlex.quote(node_image)} "
              f"--config - --wait 180s >&2 && kind get kubeconfig --name {quoted}")
    return command.local.Command(
        f"{name}-kind",
        create=create,
        delete=f"kind delete cluster --name {quoted}",
        stdin=config,
        # A changed node list or image needs a new cluster; kind cannot edit one in place.
        triggers=[hashlib.sha256(f"{node_image}\n{config}".encode()).hexdigest()],
        opts=pulumi.ResourceOptions(parent=parent, additional_secret_outputs=["stdout"]),
    )
