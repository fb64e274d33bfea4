"""ModelDeployment: the rendered objects of every placed replica, on its cluster.

The objects are registered from the placement Output, which the placement resource's
check() makes known during `pulumi preview` (providers/placement.py), so the preview
lists every object `up` will create. A replica appearing or leaving shows as its
objects being created or deleted.
"""

from __future__ import annotations

from typing import Any, Mapping

import pulumi

from components.k8s import object_name, plain, register_objects


def candidate_clusters(fleet: Any, deployment: Any) -> list[str]:
    """Clusters both the deployment's and its cache's selectors match (the scheduler's
    candidates: a replica can only ever be placed or kept on one of these)."""
    selectors = [deployment.spec.template.spec.cluster_selector]
    cache = fleet.cache_for(deployment)
    if cache is not None:
        selectors.append(cache.spec.cluster_selector)
    return [name for name, cluster in sorted(fleet.clusters.items())
            if all(s is None or s.matches(cluster.metadata.labels or {}) for s in selectors)]


def deployment_placement(placement: Mapping[str, Any] | None, namespace: str, name: str) -> dict:
    for dep in (placement or {}).get("deployments", []):
        if dep.get("namespace") == namespace and dep.get("name") == name:
            return dep
    return {"namespace": namespace, "name": name, "desired": 0, "replicas": [], "conditions": [], "unplaced": []}


def render_on_cluster(fleet: Any, deployment: Any, placement: Mapping[str, Any], cluster: str) -> list[dict]:
    from modelplane.render import render_replica
    from modelplane.scheduler import FleetPlacement

    ns, name = deployment.metadata.namespace or "default", deployment.metadata.name
    placed = FleetPlacement.from_json(placement).find(ns, name)
    objs: list[dict] = []
    for replica in (placed.replicas if placed else []):
        if replica.cluster == cluster:
            objs += render_replica(fleet, deployment, replica, fleet.clusters[cluster])
    return plain(objs)


def replica_summary(dep: Mapping[str, Any]) -> list[dict]:
    return [{"name": r["name"], "index": r["index"], "cluster": r["cluster"],
             "pools": {e: (p.get("members") or [p["pool"]]) for e, p in sorted(r["engines"].items())}}
            for r in dep.get("replicas", [])]


def explanations(dep: Mapping[str, Any]) -> list[str]:
    """One line per replica that could not be placed, naming each cluster's reason."""
    lines = []
    for unplaced in dep.get("unplaced", []):
        reasons = "; ".join(f"{c}: {r}" for c, r in sorted((unplaced.get("reasons") or {}).items()))
        lines.append(f"replica {unplaced['index']} not placed: {reasons or 'no candidate cluster'}")
    return lines


class ModelDeployment(pulumi.ComponentResource):
    replicas: pulumi.Output[list]
    conditions: pulumi.Output[list]
    explanations: pulumi.Output[list]
    objects: pulumi.Output[list]  # "<kind> <cluster>:<ns>/<name>" of every registered object

    def __init__(self, name: str, fleet: Any, deployment: Any, placement: pulumi.Output[dict],
                 clusters: Mapping[str, Any], depends_on: Mapping[str, list[pulumi.Resource]],
                 opts: pulumi.ResourceOptions | None = None):
        ns, dname = deployment.metadata.namespace or "default", deployment.metadata.name
        candidates = [c for c in candidate_clusters(fleet, deployment) if c in clusters]
        props = {"namespace": ns, "name": dname, "replicas": deployment.spec.replicas,
                 "clusters": candidates, "manifest": deployment.to_manifest()}
        super().__init__("modelplane:index:ModelDeployment", name, props, opts)

        def register(p: Mapping[str, Any]) -> list[str]:
            names = []
            for cluster in candidates:
                objs = render_on_cluster(fleet, deployment, p, cluster)
                opts = pulumi.ResourceOptions(parent=self, provider=clusters[cluster].provider,
                                              depends_on=list(depends_on.get(cluster, [])))
                register_objects(cluster, objs, opts)
                names += [f"{o['kind']} {object_name(cluster, o)}" for o in objs]
            return names

        mine = placement.apply(lambda p: deployment_placement(p, ns, dname))
        self.objects = placement.apply(register)
        self.replicas = mine.apply(replica_summary)
        self.conditions = mine.apply(lambda d: list(d.get("conditions", [])))
        self.explanations = mine.apply(explanations)
        self.register_outputs({"replicas": self.replicas, "conditions": self.conditions,
                               "explanations": self.explanations, "objects": self.objects})
