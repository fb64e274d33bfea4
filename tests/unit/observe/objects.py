"""Kubernetes objects as the API returns them, for the observer's table tests: nodes and
ResourceSlices from the sim's own rules (modelplane.node_objects), claims and pods of ours or of
another tenant, shaped as kube-controller-manager and kube-scheduler leave them."""

from __future__ import annotations

import copy
from typing import Any

from modelplane.api import Fleet
from modelplane.node_objects import cluster_nodes, resource_slices
from modelplane.observe.read import ClusterRead
from modelplane.render.meta import replica_labels


def cluster_objects(fleet: Fleet, name: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(Ready nodes, their ResourceSlices) exactly as the sim creates them."""
    cluster = fleet.clusters[name]
    shapes = cluster_nodes(fleet, cluster)
    nodes = []
    for shape in shapes:
        node: dict[str, Any] = copy.deepcopy(shape.manifest())
        node["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
        nodes.append(node)
    return nodes, [copy.deepcopy(s) for s in resource_slices(fleet, cluster, shapes)]


def slice_devices(slices: list[dict[str, Any]], node: str) -> list[tuple[str, str, str]]:
    return [(s["spec"]["driver"], s["spec"]["pool"]["name"], d["name"])
            for s in slices if s["spec"]["nodeName"] == node for d in s["spec"]["devices"]]


def claim(namespace: str, name: str, devices: list[tuple[str, str, str]], owner_pod: str | None = None
          ) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if owner_pod:
        meta["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": owner_pod, "uid": "u",
                                    "controller": True}]
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": meta,
            "status": {"allocation": {"devices": {"results": [
                {"request": "gpu", "driver": d, "pool": p, "device": n} for d, p, n in devices]}}}}


def our_pod(namespace: str, name: str, deployment: str, cluster: str, index: int, engine: str = "main", *,
            node: str | None = None, pool: str = "gpu", template: str | None = None, claim_name: str | None = None,
            phase: str = "Running", ready: bool = True, scheduled_message: str | None = None) -> dict[str, Any]:
    labels = {**replica_labels(deployment, cluster, index), "modelplane.ai/engine": engine}
    spec: dict[str, Any] = {"nodeSelector": {"modelplane.ai/pool": pool}}
    if node:
        spec["nodeName"] = node
    status: dict[str, Any] = {"phase": phase, "conditions": []}
    if template:
        spec["resourceClaims"] = [{"name": "devices", "resourceClaimTemplateName": template}]
        if claim_name:
            status["resourceClaimStatuses"] = [{"name": "devices", "resourceClaimName": claim_name}]
    if scheduled_message is not None:
        status["conditions"].append({"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                     "message": scheduled_message})
    else:
        status["conditions"].append({"type": "PodScheduled", "status": "True"})
        status["conditions"].append({"type": "Ready", "status": "True" if ready else "False"})
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace, "labels": labels},
            "spec": spec, "status": status}


def reading(cluster: str, nodes: list[dict[str, Any]], slices: list[dict[str, Any]],
            claims: list[dict[str, Any]] = (), pods: list[dict[str, Any]] = ()) -> ClusterRead:  # type: ignore[assignment]
    return ClusterRead(cluster, list(nodes), list(slices), list(claims), list(pods))
