"""ServingStack: the charts and the KAI queue a workload cluster runs besides the models,
as the core's foundation lists them (modelplane.render.serving). The gateways are
separate components (components/gateway.py)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pulumi
import pulumi_kubernetes as k8s

from components.k8s import RenderedObject, register_objects
from modelplane.render.gitops import chart_namespace
from modelplane.render.serving import ChartSpec
from modelplane.vocabulary import Manifest


@dataclass(kw_only=True)
class ServingStackArgs:
    cluster: str
    stack: str                                   # Default | Dynamo
    charts: Sequence[ChartSpec] = ()
    kai_queue: Manifest | None = None
    # Off for the offline render stack (charts come from their registries) and for
    # Existing clusters whose platform team runs the stack itself.
    install_charts: bool = True
    # The render stack: the charts are not installed (nothing is fetched), but their namespaces and
    # pre-chart objects are written like any manifest (ClusterFoundation.stack_objects).
    stack_objects: Sequence[Manifest] = ()
    depends_on: Sequence[pulumi.Resource] = field(default_factory=list)
    # Chart name -> what its pods need before they exist (ProvisionedCluster.chart_dependencies).
    chart_depends_on: Mapping[str, Sequence[pulumi.Resource]] = field(default_factory=dict)


class ServingStack(pulumi.ComponentResource):
    """Installs the charts and creates the KAI queue (Dynamo)."""

    ready: list[pulumi.Resource]

    def __init__(self, name: str, args: ServingStackArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        props = {"cluster": args.cluster, "stack": args.stack, "installCharts": args.install_charts,
                 "charts": [{"name": c.name, "chart": c.chart, "version": c.version, "repository": c.repository or ""}
                            for c in args.charts]}
        super().__init__("modelplane:index:ServingStack", name, props, opts)
        self.ready = []
        if args.install_charts:
            for spec in args.charts:
                # The namespace `modelplane render` writes too (modelplane.render.gitops).
                ns = k8s.core.v1.Namespace(f"{name}-{spec.name}-ns", metadata=chart_namespace(spec)["metadata"],
                                           opts=pulumi.ResourceOptions(parent=self))
                # What the chart's pods need at admission (e.g. GKE's critical-pods quota).
                pre = register_objects(args.cluster, spec.pre_objects,
                                       pulumi.ResourceOptions(parent=self, depends_on=[ns]))
                repo = k8s.helm.v4.RepositoryOptsArgs(repo=spec.repository) if spec.repository else None
                self.ready.append(k8s.helm.v4.Chart(
                    f"{name}-{spec.name}", chart=spec.chart, version=spec.version, namespace=spec.namespace,
                    repository_opts=repo, values=dict(spec.values),
                    opts=pulumi.ResourceOptions(parent=self, depends_on=[
                        ns, *pre, *args.chart_depends_on.get(spec.name, ())])))
        elif args.stack_objects:
            self.ready += register_objects(args.cluster, args.stack_objects, pulumi.ResourceOptions(parent=self))
        if args.kai_queue is not None:
            # Grove's KAI backend rejects pods whose queue does not exist.
            self.ready.append(RenderedObject(f"{name}-kai-queue", args.kai_queue, pulumi.ResourceOptions(
                parent=self, depends_on=[*args.depends_on, *self.ready])))
        self.register_outputs({"charts": props["charts"]})
