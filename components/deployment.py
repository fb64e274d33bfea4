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

from components.k8s import object_name, register_objects
from modelplane.api import ModelDeployment as DeploymentSpec
from modelplane.plan import FleetPlan
from modelplane.scheduler import DeploymentPlacement
from modelplane.scheduler.report import explanations, replica_summary


@dataclass(kw_only=True)
class ModelDeploymentArgs:
    deployment: DeploymentSpec
    plan: pulumi.Output[FleetPlan]
    candidates: Sequence[str]                                  # clusters a replica may ever run on
    providers: Mapping[str, pulumi.ProviderResource]           # cluster -> its Kubernetes provider
    ready: Mapping[str, pulumi.Input[Sequence[pulumi.Resource]]] = field(default_factory=dict)


class ModelDeployment(pulumi.ComponentResource):
    replicas: pulumi.Output[list[dict[str, Any]]]
    conditions: pulumi.Output[list[dict[str, Any]]]
    explanations: pulumi.Output[list[str]]
    objects: pulumi.Output[list[str]]  # "<kind> <cluster>:<ns>/<name>" of every registered object

    def __init__(self, name: str, args: ModelDeploymentArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        dep = args.deployment
        ns, dname = dep.metadata.namespace or "default", dep.metadata.name
        props = {"namespace": ns, "name": dname, "replicas": dep.spec.replicas,
                 "clusters": list(args.candidates), "manifest": dep.to_manifest()}
        super().__init__("modelplane:index:ModelDeployment", name, props, opts)

        def register(fp: FleetPlan) -> list[str]:
            names = []
            for replica in fp.replicas_of(ns, dname):
                cluster = replica.replica.cluster
                register_objects(cluster, replica.objects, pulumi.ResourceOptions(
                    parent=self, provider=args.providers[cluster], depends_on=args.ready.get(cluster, [])))
                names += [f"{o['kind']} {object_name(cluster, o)}" for o in replica.objects]
            return names

        def mine(fp: FleetPlan) -> DeploymentPlacement:
            return fp.placement.find(ns, dname) or DeploymentPlacement(ns, dname, 0)

        placed = args.plan.apply(mine)
        self.objects = args.plan.apply(register)
        self.replicas = placed.apply(replica_summary)
        self.conditions = placed.apply(lambda d: [c.to_json() for c in d.conditions])
        self.explanations = placed.apply(explanations)
        self.register_outputs({"replicas": self.replicas, "conditions": self.conditions,
                               "explanations": self.explanations, "objects": self.objects})
