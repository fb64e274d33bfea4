"""InferenceCluster: one cluster of the fleet and the Kubernetes provider that reaches it."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.args import AwsArgs, ClusterAccess, GcpArgs
from components.k8s import register_objects
from components.labels import k8s_labels
from components.pool_labels import NAMESPACE, pool_label_objects
from components.sources.kind import check_node_image, kind_cluster

PROVISIONED = ("Kind", "EKS", "GKE")


@dataclass
class InferenceClusterArgs:
    cluster: Any  # modelplane.api.InferenceCluster
    fleet: Any
    access: ClusterAccess = field(default_factory=ClusterAccess)
    render_dir: str | None = None
    host_port: int | None = None  # Kind: publish the gateway NodePort on the host
    aws: AwsArgs = field(default_factory=AwsArgs)
    gcp: GcpArgs = field(default_factory=GcpArgs)


class InferenceCluster(pulumi.ComponentResource):
    """Creates (Kind, EKS, GKE) or reaches (Existing) a cluster; children use `provider`.

    With `render_dir` nothing is provisioned: the provider writes YAML to
    `<render_dir>/<cluster>` (the GitOps path)."""

    provider: k8s.Provider
    kubeconfig: pulumi.Output[str] | None
    namespace: k8s.core.v1.Namespace

    def __init__(self, name: str, args: InferenceClusterArgs, opts: pulumi.ResourceOptions | None = None):
        spec = args.cluster
        props = {"source": spec.source, "renderDir": args.render_dir or "",
                 "manifest": spec.to_manifest()}
        super().__init__("modelplane:index:InferenceCluster", name, props, opts)
        self.source = spec.source
        self.kubeconfig = None if args.render_dir else self._connect(name, args)
        self.provider = _provider(name, self, args, self.kubeconfig)
        child = pulumi.ResourceOptions(parent=self, provider=self.provider)
        self.namespace = k8s.core.v1.Namespace(
            f"{name}-system", metadata={"name": NAMESPACE, "labels": k8s_labels("system", {"modelplane.ai/cluster": name})},
            opts=child)
        labeler = pool_label_objects(name, spec.spec.node_pools) if spec.source not in PROVISIONED else []
        if labeler:
            register_objects(name, labeler, pulumi.ResourceOptions(parent=self, provider=self.provider,
                                                                   depends_on=[self.namespace]))
        outputs: dict[str, Any] = {"source": spec.source, "pools": [p.name for p in spec.spec.node_pools]}
        if self.kubeconfig is not None:
            outputs["kubeconfig"] = self.kubeconfig
        self.register_outputs(outputs)

    def _connect(self, name: str, args: InferenceClusterArgs) -> pulumi.Input[str] | None:
        spec, source = args.cluster, args.cluster.source
        if source == "Kind":
            image = spec.spec.cluster.kind.node_image
            check_node_image(image, f"InferenceCluster {name}")
            pools = [(p.name, p.node_count) for p in spec.spec.node_pools]
            return kind_cluster(name, image, pools, self, args.host_port).stdout
        if source == "EKS":
            from components.sources.eks import eks_cluster  # the AWS SDK is large; load on use
            return eks_cluster(name, spec, args.fleet, args.aws, self)
        if source == "GKE":
            from components.sources.gke import gke_cluster
            return gke_cluster(name, spec, args.fleet, args.gcp, self)
        if args.access.kubeconfig is None and not args.access.kubeconfig_path:
            raise ValueError(
                f"InferenceCluster {name} (source {source}) is not provisioned by this program; set its "
                f"kubeconfig with `pulumi config set --secret --path 'kubeconfigs.{name}' \"$(cat kubeconfig)\"` "
                f"or clusters.{name}.kubeconfigPath")
        if source != "Existing":
            pulumi.log.warn(f"InferenceCluster {name}: source {source} is reached as an Existing cluster "
                            "through its kubeconfig; this program does not provision it", self)
        if args.access.kubeconfig is not None:
            return pulumi.Output.secret(args.access.kubeconfig)
        return None  # the provider reads kubeconfig_path itself


def _provider(name: str, parent: pulumi.Resource, args: InferenceClusterArgs,
              kubeconfig: pulumi.Input[str] | None) -> k8s.Provider:
    opts = pulumi.ResourceOptions(parent=parent)
    if args.render_dir:
        return k8s.Provider(f"{name}-k8s", render_yaml_to_directory=os.path.join(args.render_dir, name),
                            opts=opts)
    return k8s.Provider(
        f"{name}-k8s", kubeconfig=kubeconfig if kubeconfig is not None else args.access.kubeconfig_path,
        context=args.access.context,
        # A rotated EKS/GKE token changes the kubeconfig; only a new cluster should
        # replace the provider (and everything on it).
        cluster_identifier=name, opts=opts)


def control_cluster(name: str, source: str, node_image: str, access: ClusterAccess, render_dir: str | None,
                    host_port: int | None = None, opts: pulumi.ResourceOptions | None = None) -> InferenceCluster:
    """The control cluster, when it is not one of the fleet's clusters."""
    from modelplane.api import load_manifest_text

    block = {"Kind": f"kind: {{nodeImage: '{node_image}'}}", "Existing": "existing: {}"}[source]
    manifest = (f"apiVersion: modelplane.ai/v1alpha1\nkind: InferenceCluster\nmetadata: {{name: {name}}}\n"
                f"spec: {{cluster: {{source: {source}, {block}}}}}\n")
    spec = load_manifest_text(manifest, source="<stack config controlPlane>").clusters[name]
    return InferenceCluster(name, InferenceClusterArgs(cluster=spec, fleet=None, access=access,
                                                       render_dir=render_dir, host_port=host_port), opts)
