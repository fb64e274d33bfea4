"""ModelDeployment: the objects of every placed replica, on its cluster, as the plan has
them (modelplane.plan).

The objects are registered from the plan Output, which the placement resource's check()
makes known during `pulumi preview` (providers/placement.py), so the preview lists every
object `up` will create. A replica appearing or leaving shows as its objects being
created or deleted.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pulumi

from components.errors import ResourceError
from components.k8s import ClusterReady, register_ready
from modelplane.api import ModelDeployment as DeploymentSpec
from modelplane.json_types import JsonObject
from modelplane.plan import FleetPlan
from modelplane.scheduler import DeploymentPlacement
from modelplane.scheduler.placement_report import explanations, replica_summary


@dataclass(kw_only=True)
class ModelDeploymentArgs:
    deployment: DeploymentSpec
    plan: pulumi.Output[FleetPlan]
    candidates: Sequence[str]                                  # clusters a replica may ever run on
    providers: Mapping[str, pulumi.ProviderResource]           # cluster -> its Kubernetes provider
    # cluster -> what its objects wait for; the clusters this stack applies
    ready: Mapping[str, pulumi.Output[ClusterReady]] = field(default_factory=dict)


class ModelDeployment(pulumi.ComponentResource):
    replicas: pulumi.Output[list[JsonObject]]
    conditions: pulumi.Output[list[JsonObject]]
    explanations: pulumi.Output[list[str]]
    created: pulumi.Output[list[str]]  # the ids of its objects: resolves once every one is applied

    def __init__(self, name: str, args: ModelDeploymentArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        dep = args.deployment
        ns, dname = dep.metadata.namespace or "default", dep.metadata.name
        props = {"namespace": ns, "name": dname, "replicas": dep.spec.replicas,
                 "clusters": list(args.candidates), "manifest": dep.to_manifest()}
        super().__init__("modelplane:index:ModelDeployment", name, props, opts)
        here = [c for c in args.candidates if c in args.ready]

        registered: list[pulumi.Resource] = []

        def register(values: list[Any]) -> DeploymentPlacement:
            fp, readies = values[0], dict(zip(here, values[1:], strict=True))
            for replica in fp.replicas_of(ns, dname):
                cluster = replica.replica.cluster
                if cluster not in readies:   # the scheduler keeps and places replicas on candidates only
                    raise ResourceError(f"replica {replica.replica.name} is on {cluster}, which is not a candidate "
                                        f"cluster of {ns}/{dname} in this stack", self)
                registered.extend(register_ready(cluster, replica.objects, readies[cluster], args.providers[cluster],
                                                 self))
            return fp.placement.find(ns, dname) or DeploymentPlacement(ns, dname, 0)

        placed = pulumi.Output.all(args.plan, *[args.ready[c] for c in here]).apply(register)
        self.created = placed.apply(lambda _: pulumi.Output.all(*[r.id for r in registered
                                                                  if isinstance(r, pulumi.CustomResource)]))
        self.replicas = placed.apply(replica_summary)
        self.conditions = placed.apply(lambda d: [c.to_json() for c in d.conditions])
        self.explanations = placed.apply(explanations)
        self.register_outputs({"replicas": self.replicas, "conditions": self.conditions,
                               "explanations": self.explanations})
