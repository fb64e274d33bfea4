"""InferenceCluster: one cluster of the fleet and the Kubernetes provider that reaches it."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import pulumi
import pulumi_kubernetes as k8s

from components.args import AwsArgs, ClusterAccess, ControlPlaneArgs, GcpArgs
from components.errors import ResourceError
from components.k8s import RenderedObject, register_objects
from components.sim import CLIENT_TIMEOUT_S, SimCluster, SimClusterDown, SimUnavailable, simulated_cluster
from components.sources import ProvisionedCluster
from components.sources.kind import kind_cluster, restart_warning
from modelplane.api import Fleet, load_manifest_text
from modelplane.api import InferenceCluster as ClusterSpec
from modelplane.checks.kind_node_image import node_image_error
from modelplane.json_types import JsonObject
from modelplane.plan import ClusterFoundation
from modelplane.render import render_system_namespace
from modelplane.vocabulary import PROVISIONED_SOURCES


@dataclass(kw_only=True)
class InferenceClusterArgs:
    cluster: ClusterSpec
    # The fleet the cluster belongs to and its placement-free plan (modelplane.plan);
    # None for the stack's own control cluster.
    fleet: Fleet | None = None
    foundation: ClusterFoundation | None = None
    access: ClusterAccess = field(default_factory=ClusterAccess)
    render_dir: str | None = None
    host_port: int | None = None  # Kind: publish the control-plane gateway's NodePort on the host
    aws: AwsArgs = field(default_factory=AwsArgs)
    gcp: GcpArgs = field(default_factory=GcpArgs)
    # The placement observes the clusters (docs/observe.md): a simulated cluster that stopped
    # answering is then an unreachable cluster to fail over, not an error.
    observed: bool = False


class InferenceCluster(pulumi.ComponentResource):
    """Creates (Kind, EKS, GKE) or reaches (Existing) a cluster; children use `provider`.
    Registers the cluster's `modelplane-system` namespace and, on clusters the program does
    not provision, the pool labeler (modelplane.plan's foundation).

    With `render_dir` nothing is provisioned: the provider writes YAML to
    `<render_dir>/<cluster>` (the GitOps path). With `access.sim` (the sim stack) nothing is
    provisioned either: whatever its source, the cluster is reached through its running
    simulated twin (components/sim.py), or the preview fails naming it."""

    provider: k8s.Provider
    kubeconfig: pulumi.Output[str] | None
    namespace: k8s.core.v1.Namespace

    def __init__(self, name: str, args: InferenceClusterArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        spec = args.cluster
        props = {"source": spec.source, "renderDir": args.render_dir or "", "manifest": spec.to_manifest()}
        super().__init__("modelplane:index:InferenceCluster", name, props, opts)
        self.source = spec.source
        # The Kubernetes provider's clusterIdentifier: a recreated cluster changes it (Kind).
        self.identity = name
        self.simulated = _simulated(name, args, self)
        connected = None if args.render_dir or self.simulated else self._connect(name, args)
        provisioned = connected if isinstance(connected, ProvisionedCluster) else None
        self.kubeconfig = connected.kubeconfig if isinstance(connected, ProvisionedCluster) else connected
        # What the serving stack's charts need of the cloud (components/sources: EKS).
        self.physical_name = provisioned.physical_name if provisioned is not None else None
        self.chart_dependencies = dict(provisioned.chart_dependencies) if provisioned is not None else {}
        self.provider = _provider(name, self, args, self.kubeconfig, self.simulated, self.identity)
        # The cache StorageClass of a cluster we provision, on its own provider: ModelCache
        # PVCs name it (modelplane.storage).
        self.storage_class: RenderedObject | None = None
        if provisioned is not None and provisioned.storage_class is not None:
            self.storage_class = RenderedObject(f"{name}-cache-storage", provisioned.storage_class,
                                                pulumi.ResourceOptions(parent=self, provider=self.provider))
        foundation = args.foundation
        system = foundation.system_namespace if foundation else render_system_namespace(name)
        self.namespace = k8s.core.v1.Namespace(f"{name}-system", metadata=system["metadata"],
                                               opts=pulumi.ResourceOptions(parent=self, provider=self.provider))
        if foundation and foundation.pool_labeler:
            register_objects(name, foundation.pool_labeler, pulumi.ResourceOptions(
                parent=self, provider=self.provider, depends_on=[self.namespace]))
        outputs: JsonObject = {"source": spec.source, "pools": [p.name for p in spec.spec.node_pools]}
        if self.kubeconfig is not None:
            outputs["kubeconfig"] = self.kubeconfig
        self.register_outputs(outputs)

    def _connect(self, name: str, args: InferenceClusterArgs) -> pulumi.Output[str] | ProvisionedCluster | None:
        spec, source = args.cluster, args.cluster.source
        if source == "Kind":
            kind = spec.spec.cluster.kind
            image = kind.node_image if kind is not None else ControlPlaneArgs().node_image
            error = node_image_error(image)
            if error:
                where = args.fleet.source_of(spec) if args.fleet is not None else "stack config controlPlane"
                raise ResourceError(f"{where}: InferenceCluster {name}: {error}", self)
            pools = [(p.name, p.node_count) for p in spec.spec.node_pools]
            created = kind_cluster(name, image, pools, self, host_port=args.host_port)
            self.identity = created.identity
            restarted = restart_warning(name)
            if restarted:
                pulumi.log.warn(restarted, self)
            return created.command.stdout
        if source in ("EKS", "GKE"):
            if args.fleet is None:
                raise ResourceError(f"InferenceCluster {name}: {source} clusters are provisioned from a fleet", self)
            if source == "EKS":
                from components.sources.eks import eks_cluster  # the AWS SDK is large: imported by EKS stacks only
                return eks_cluster(name, spec, args.fleet, args.aws, self)
            from components.sources.gke import gke_cluster  # the GCP SDK is large: imported by GKE stacks only
            return gke_cluster(name, spec, args.fleet, args.gcp, self)
        if args.access.kubeconfig is None and not args.access.kubeconfig_path:
            raise ResourceError(
                f"InferenceCluster {name} (source {source}) is not provisioned by this program; set its "
                f"kubeconfig with `pulumi config set --secret --path 'kubeconfigs.{name}' \"$(cat kubeconfig)\"` "
                f"or clusters.{name}.kubeconfigPath", self)
        if source not in PROVISIONED_SOURCES and source != "Existing":
            pulumi.log.warn(f"InferenceCluster {name}: source {source} is reached as an Existing cluster "
                            "through its kubeconfig; this program does not provision it", self)
        if args.access.kubeconfig is not None:
            return pulumi.Output.secret(args.access.kubeconfig)
        return None  # the provider reads kubeconfig_path itself


def _simulated(name: str, args: InferenceClusterArgs, parent: pulumi.Resource) -> SimCluster | None:
    """On the sim stack, the running simulated twin of this cluster (whatever its source); a
    clean error at preview when it does not run, or when the sim cannot run its serving stack."""
    sim = args.access.sim
    if sim is None or args.render_dir:
        return None
    where = f"{args.fleet.source_of(args.cluster)}: " if args.fleet is not None else ""
    if args.cluster.spec.stack == "Dynamo":
        # Applying the rest would leave namespaces, caches and ModelExpress up and no engine:
        # a green `pulumi up` next to a fleet that serves nothing (docs/sim.md).
        raise ResourceError(
            f"{where}InferenceCluster {name} runs the Dynamo stack, which the sim stack cannot rehearse: its "
            "replicas are Grove PodCliqueSets scheduled by the KAI scheduler, and neither runs on the simulated "
            "clusters (the Go module proxy serves neither module, so there are no Grove or KAI CRDs; "
            "docs/sim.md). Rehearse it with the render stack, or set spec.stack: Default to rehearse it "
            "on LeaderWorkerSet", parent)
    try:
        return simulated_cluster(name, sim)
    except SimClusterDown as exc:
        if not args.observed:        # nobody fails it over: the stack cannot go on
            raise ResourceError(f"InferenceCluster {name} (sim stack): {exc}", parent) from None
        # A cluster that went away is unreachable, not a broken stack: its replicas stay during the
        # grace period and are re-placed after it (observed capacity, docs/observe.md); nothing of it changes.
        pulumi.log.warn(f"InferenceCluster {name} (sim stack): {exc}. It is unreachable: it takes no new replica, "
                        "and its replicas are re-placed elsewhere after the grace period (docs/observe.md)", parent)
        return exc.cluster
    except SimUnavailable as exc:
        raise ResourceError(f"InferenceCluster {name} (sim stack): {exc}", parent) from None


def _provider(name: str, parent: pulumi.Resource, args: InferenceClusterArgs,
              kubeconfig: pulumi.Input[str] | None, simulated: SimCluster | None = None,
              identity: str | None = None) -> k8s.Provider:
    opts = pulumi.ResourceOptions(parent=parent)
    if args.render_dir:
        return k8s.Provider(f"{name}-k8s", render_yaml_to_directory=os.path.join(args.render_dir, name),
                            opts=opts)
    if simulated is not None:
        return k8s.Provider(
            f"{name}-k8s", kubeconfig=simulated.kubeconfig, cluster_identifier=simulated.identifier(name),
            kube_client_settings=k8s.KubeClientSettingsArgs(timeout=CLIENT_TIMEOUT_S),
            # Once `sim down` has removed the cluster, its objects are gone with it: destroy forgets them.
            delete_unreachable=True, opts=opts)
    return k8s.Provider(
        f"{name}-k8s", kubeconfig=kubeconfig if kubeconfig is not None else args.access.kubeconfig_path,
        context=args.access.context,
        # A rotated EKS/GKE token changes the kubeconfig; only a new cluster should
        # replace the provider (and everything on it): a recreated Kind cluster has a new identity.
        cluster_identifier=identity or name, opts=opts)


def control_cluster(args: ControlPlaneArgs, *, render_dir: str | None, host_port: int | None = None,
                    opts: pulumi.ResourceOptions | None = None) -> InferenceCluster:
    """The control cluster, when it is not one of the fleet's clusters."""
    block = {"Kind": f"kind: {{nodeImage: '{args.node_image}'}}", "Existing": "existing: {}"}.get(args.source)
    if block is None:
        raise pulumi.RunError(f"stack config controlPlane.source must be Kind or Existing, not {args.source!r}")
    manifest = (f"apiVersion: modelplane.ai/v1alpha1\nkind: InferenceCluster\nmetadata: {{name: {args.name}}}\n"
                f"spec: {{cluster: {{source: {args.source}, {block}}}}}\n")
    spec = load_manifest_text(manifest, source="<stack config controlPlane>").clusters[args.name]
    return InferenceCluster(args.name, InferenceClusterArgs(cluster=spec, access=args.access, render_dir=render_dir,
                                                            host_port=host_port), opts)
