"""What one renderer call needs to know about the replica and member it is drawing."""

from __future__ import annotations

from dataclasses import dataclass

from modelplane.api import Engine, Fleet, InferenceCluster, Member, ModelCache, ModelDeployment
from modelplane.scheduler import PlacedReplica
from modelplane.vocabulary import ANNOTATION_MODELEXPRESS

from .meta import DEFAULT_REVISION, RenderError, replica_labels
from .names import cache_pvc_name


def resolve_cluster(fleet: Fleet, cluster: InferenceCluster | str) -> InferenceCluster:
    """The cluster itself, given it or its name."""
    if not isinstance(cluster, str):
        return cluster
    found = fleet.clusters.get(cluster)
    if found is None:
        raise RenderError(f"InferenceCluster {cluster!r} is not in the fleet")
    return found


@dataclass(frozen=True)
class ReplicaContext:
    fleet: Fleet
    deployment: ModelDeployment
    replica: PlacedReplica
    cluster: InferenceCluster
    cache: ModelCache | None     # the referenced ModelCache, if any

    @property
    def name(self) -> str:
        return self.replica.name

    @property
    def namespace(self) -> str:
        return self.deployment.metadata.namespace or "default"

    @property
    def deployment_name(self) -> str:
        return self.deployment.metadata.name

    @property
    def cluster_name(self) -> str:
        return self.cluster.metadata.name

    @property
    def dynamo(self) -> bool:
        return self.cluster.spec.stack == "Dynamo"

    @property
    def prefill_decode(self) -> bool:
        serving = self.deployment.spec.template.spec.serving
        return serving is not None and serving.mode == "PrefillDecode"

    @property
    def labels(self) -> dict[str, str]:
        return replica_labels(self.deployment_name, self.cluster_name, self.replica.index)

    @property
    def revision(self) -> str | None:
        if self.cache is None:
            return None
        return self.cache.revision or DEFAULT_REVISION

    @property
    def cache_pvc(self) -> str | None:
        return None if self.cache is None else cache_pvc_name(self.namespace, self.cache.metadata.name)

    @property
    def modelexpress(self) -> bool:
        # ModelExpress identifies weights by the cache PVC and falls back to it, so it is
        # only wired up where a cache backs the engine.
        return self.dynamo and self.cache is not None


@dataclass(frozen=True)
class MemberContext:
    replica: ReplicaContext
    engine: Engine
    member: Member
    member_index: int
    pool: str
    claim_template: str | None
    gang: str | None      # None (Standalone), "lws" or "grove"
    serving: bool         # receives traffic: Standalone pods and gang leaders
    claimed: int = 0      # GPUs (DRA devices other than EFA) one pod of the member claims

    @property
    def role(self) -> str:
        return self.member.role

    @property
    def crosses_nodes(self) -> bool:
        """The member's GPUs talk to other nodes: a gang's, or a PrefillDecode phase's (NIXL)."""
        return self.gang is not None or (self.replica.prefill_decode and self.engine.phase is not None)

    @property
    def modelexpress_loader(self) -> bool:
        """ModelExpress is wired and the deployment (or this member) opted in to its loader."""
        if not self.replica.modelexpress:
            return False
        notes = [self.replica.deployment.metadata.annotations or {}, self.member.template.metadata.annotations or {}]
        return any(str(n.get(ANNOTATION_MODELEXPRESS, "")).lower() == "true" for n in notes)


def referenced_cache(fleet: Fleet, deployment: ModelDeployment) -> ModelCache | None:
    ref = deployment.spec.template.spec.model_cache_ref
    if ref is None:
        return None
    namespace = deployment.metadata.namespace or "default"
    cache = fleet.caches.get((namespace, ref.name))
    if cache is None:
        raise RenderError(
            f"ModelDeployment {namespace}/{deployment.metadata.name} references ModelCache "
            f"{ref.name!r}, which does not exist in namespace {namespace}"
        )
    return cache
