"""`modelplane.ai/pool` on nodes of clusters the program does not provision.

Pods are pinned by that label; on a bring-your-own cluster nobody sets it and pods stay
Pending without an error (mission, silent failure 6). With `poolLabel.mode: Apply` a
Job labels the nodes the pool's node selector names, every time it is applied.

The Job runs `kubectl` itself, one container per pool, never a shell: the
`registry.k8s.io/kubectl` image is built on go-runner (kubernetes/kubernetes build/common.sh,
`KUBECTL_BASE_IMAGE` defaults to `KUBE_GORUNNER_IMAGE`), a distroless image with no `sh`, and
the generic server-image Dockerfile (build/server-image/Dockerfile) only copies the binary into
/usr/local/bin, which is on the image's PATH.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping

from modelplane.api import Fleet, InferenceCluster, NodePool
from modelplane.clouds.aws import efa_mode
from modelplane.clouds.nvidia import GPU_PRESENT_LABEL, uses_nvidia_dra
from modelplane.vocabulary import LABEL_CLUSTER, LABEL_EFA, LABEL_POOL, PROVISIONED_SOURCES, SYSTEM_NAMESPACE, Manifest

from .meta import component_labels

KUBECTL_IMAGE = "registry.k8s.io/kubectl:v1.35.1"
LABELER = "modelplane-pool-labeler"


def _selector(match_labels: Mapping[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(match_labels.items()))


def _labels(fleet: Fleet | None, pool: NodePool) -> list[str]:
    """`modelplane.ai/pool=<pool>`, plus `nvidia.com/gpu.present=true` on NVIDIA DRA pools: the
    NVIDIA DRA driver's kubelet plugin only runs on nodes labelled so (or by NFD/the GPU
    Operator, modelplane.clouds.nvidia), and labelling twice is harmless."""
    labels = [f"{LABEL_POOL}={pool.name}"]
    if fleet is not None and uses_nvidia_dra(fleet, pool):
        labels.append(f"{GPU_PRESENT_LABEL}=true")
    if fleet is not None and (mode := efa_mode(fleet, pool)) is not None:
        labels.append(f"{LABEL_EFA}={mode}")    # which EFA driver's DaemonSet runs there
    return labels


def labeler_command(fleet: Fleet | None, pool: NodePool) -> list[str]:
    """The argv that labels one pool's nodes: kubectl itself, no shell to interpret it."""
    selector = pool.pool_label.node_selector if pool.pool_label is not None else None
    match = selector.match_labels if selector is not None else {}
    return ["kubectl", "label", "nodes", "--overwrite", "-l", _selector(match), *_labels(fleet, pool)]


def render_pool_labeler(cluster: InferenceCluster, fleet: Fleet | None = None) -> list[Manifest]:
    """ServiceAccount, ClusterRole, binding and a Job; empty when the program provisions the
    cluster (it labels the pools itself) or no pool asks for Apply."""
    if cluster.source in PROVISIONED_SOURCES:
        return []
    applied = [p for p in cluster.spec.node_pools if p.pool_label and p.pool_label.mode == "Apply"]
    if not applied:
        return []
    labels = component_labels("pool-labeler", {LABEL_CLUSTER: cluster.metadata.name})
    commands = [labeler_command(fleet, p) for p in applied
                if p.pool_label is not None and p.pool_label.node_selector is not None]
    # The commands are part of the Job name so a changed selector runs a new Job (Job
    # templates are immutable).
    digest = hashlib.sha256(json.dumps(commands).encode()).hexdigest()[:8]
    meta = {"name": LABELER, "labels": labels}
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {**meta, "namespace": SYSTEM_NAMESPACE}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": meta,
         "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "patch"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": meta,
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": LABELER},
         "subjects": [{"kind": "ServiceAccount", "name": LABELER, "namespace": SYSTEM_NAMESPACE}]},
        {"apiVersion": "batch/v1", "kind": "Job",
         "metadata": {"name": f"{LABELER}-{digest}", "namespace": SYSTEM_NAMESPACE, "labels": labels},
         "spec": {"backoffLimit": 3, "template": {"metadata": {"labels": labels}, "spec": {
             "serviceAccountName": LABELER, "restartPolicy": "OnFailure",
             "containers": [{"name": f"label-{i}", "image": KUBECTL_IMAGE, "command": argv}
                            for i, argv in enumerate(commands)]}}}},
    ]
