"""`modelplane.ai/pool` on nodes of clusters the program does not provision.

Pods are pinned by that label; on a bring-your-own cluster nobody sets it and pods stay
Pending without an error (mission, silent failure 6). With `poolLabel.mode: Apply` a
Job labels the nodes the pool's node selector names, on every `pulumi up`.
"""

from __future__ import annotations

import hashlib
import shlex

from components.labels import POOL, k8s_labels

NAMESPACE = "modelplane-system"
KUBECTL_IMAGE = "registry.k8s.io/kubectl:v1.35.1"


def _selector(match_labels: dict[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(match_labels.items()))


def pool_label_objects(cluster: str, pools) -> list[dict]:
    """ServiceAccount, ClusterRole, binding and a Job; empty when no pool asks for Apply."""
    applied = [p for p in pools if p.pool_label and p.pool_label.mode == "Apply"]
    if not applied:
        return []
    labels = k8s_labels("pool-labeler", {"modelplane.ai/cluster": cluster})
    script = " && ".join(
        f"kubectl label nodes --overwrite -l {shlex.quote(_selector(p.pool_label.node_selector.match_labels))} "
        f"{POOL}={shlex.quote(p.name)}" for p in applied)
    # The script is part of the Job name so a changed selector runs a new Job (Job
    # templates are immutable).
    digest = hashlib.sha256(script.encode()).hexdigest()[:8]
    name = "modelplane-pool-labeler"
    meta = {"name": name, "labels": labels}
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {**meta, "namespace": NAMESPACE}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": meta,
         "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "patch"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": meta,
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
         "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": NAMESPACE}]},
        {"apiVersion": "batch/v1", "kind": "Job",
         "metadata": {"name": f"{name}-{digest}", "namespace": NAMESPACE, "labels": labels},
         "spec": {"backoffLimit": 3, "template": {"metadata": {"labels": labels}, "spec": {
             "serviceAccountName": name, "restartPolicy": "OnFailure",
             "containers": [{"name": "label", "image": KUBECTL_IMAGE, "command": ["sh", "-c", script]}]}}}},
    ]
