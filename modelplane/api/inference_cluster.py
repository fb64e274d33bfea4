"""InferenceCluster: one Kubernetes cluster of the fleet (semantics §1.2, §1.11, §7)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from .common import (
    DNS_NAME_PATTERN,
    ApiModel,
    KindObject,
    LabelSelector,
    ObjectMeta,
    check_dns1035_label,
    check_dns_label,
    check_label_value,
    check_unique,
    check_user_labels,
    quoted,
)

SOURCES = ("Kind", "EKS", "GKE", "Existing", "AKS", "Nebius", "Vultr", "VultrBaremetal")
# The node image kind v0.32.0 was released with, pinned by digest: kind images are built for a
# kind release, whose notes list them with their digests (kubernetes-sigs/kind
# site/content/docs/user/quick-start.md; v0.32.0 pkg/apis/config/defaults/image.go `Image`).
DEFAULT_KIND_NODE_IMAGE = ("kindest/node:v1.36.1@sha256:"
                           "3489c7674813ba5d8b1a9977baea8a6e553784dab7b84759d1014dbd78f7ebd5")
# A cluster's workload gateway is `<cluster>-gateway` (its Deployment, Service, ConfigMaps, Secrets).
GATEWAY_SERVICE_SUFFIX = "-gateway"
# Pulumi auto-names a resource `<name>-<7 random characters>`; an EKS node group's name (ours
# are named `<cluster>-<pool>`) "can't be longer than 63 characters" (pulumi_aws eks NodeGroup
# `node_group_name`, the EKS CreateNodegroup rule).
AUTONAME_SUFFIX = 8
EKS_NODE_GROUP_NAME_MAX = 63


class Credentials(ApiModel):
    type: Literal["ProviderConfig", "ClusterProviderConfig"] = "ClusterProviderConfig"
    name: Annotated[str, Field(min_length=1, max_length=253)] = "default"


class KeyedSecretRef(ApiModel):
    name: Annotated[str, Field(min_length=1, max_length=253)]
    key: Annotated[str, Field(min_length=1, max_length=253)] = "kubeconfig"


class IdentitySecretRef(ApiModel):
    name: Annotated[str, Field(min_length=1, max_length=253)]
    key: Annotated[str, Field(min_length=1, max_length=253)] = "private_key"
    type: Literal[
        "GoogleApplicationCredentials", "AWSWebIdentityCredentials", "NebiusServiceAccountCredentials"
    ] = "GoogleApplicationCredentials"


class CacheStorage(ApiModel):
    storage_class_name: Annotated[str, Field(min_length=1, max_length=253)]


class ExistingSource(ApiModel):
    # The reference reads the kubeconfig from this Secret; the Pulumi program reads it from
    # stack config instead, so the reference is optional here.
    secret_ref: KeyedSecretRef | None = None
    identity_secret_ref: IdentitySecretRef | None = None
    cache: CacheStorage | None = None
    # Provided: the cluster already runs the serving components; install none of them.
    components: Literal["Managed", "Provided"] = "Managed"


class KindSource(ApiModel):
    """Ours: a local kind cluster created by the program, with fake DRA GPUs."""

    node_image: Annotated[str, Field(min_length=1)] = DEFAULT_KIND_NODE_IMAGE
    workers: Annotated[int, Field(ge=0, le=8)] | None = None


class CloudSource(ApiModel):
    region: Annotated[str, Field(min_length=1, max_length=32)]
    kubernetes_version: str | None = None
    credentials: Credentials = Field(default_factory=Credentials)


class AksSource(ApiModel):
    location: Annotated[str, Field(min_length=1, max_length=32)]
    kubernetes_version: str = "1.34"
    credentials: Credentials = Field(default_factory=Credentials)


class NebiusSource(ApiModel):
    kubernetes_version: str = "1.34"
    credentials: Credentials = Field(default_factory=Credentials)


class SshAccess(ApiModel):
    secret_ref: KeyedSecretRef


class VultrBaremetalSource(ApiModel):
    region: Annotated[str, Field(min_length=1, max_length=32)]
    kubernetes_version: str | None = None
    ssh: SshAccess | None = None
    credentials: Credentials = Field(default_factory=Credentials)


class ClusterSource(ApiModel):
    source: Literal["Kind", "EKS", "GKE", "Existing", "AKS", "Nebius", "Vultr", "VultrBaremetal"]
    endpoint_access: str | None = None
    kind: KindSource | None = None
    eks: CloudSource | None = None
    gke: CloudSource | None = None
    existing: ExistingSource | None = None
    aks: AksSource | None = None
    nebius: NebiusSource | None = None
    vultr: CloudSource | None = None
    vultr_baremetal: VultrBaremetalSource | None = None

    @model_validator(mode="before")
    @classmethod
    def _default_blocks(cls, data: Any) -> Any:
        # Kind and Nebius blocks may be empty; the reference allows `nebius: {}`.
        if isinstance(data, dict) and data.get("source") in ("Kind",) and data.get("kind") is None:
            data = {**data, "kind": {}}
        return data

    @model_validator(mode="after")
    def _block(self) -> ClusterSource:
        block = _block_field(self.source)
        if getattr(self, block) is None:
            raise ValueError(f"cluster.{_camel(block)} is required when source is {self.source}")
        others = [_block_field(s) for s in SOURCES
                  if _block_field(s) != block and getattr(self, _block_field(s)) is not None]
        if others:
            raise ValueError(f"cluster.{_camel(others[0])} is set but source is {self.source}; "
                             "remove it or change source")
        return self


def _block_field(source: str) -> str:
    return "vultr_baremetal" if source == "VultrBaremetal" else source.lower()


def _camel(field: str) -> str:
    head, *rest = field.split("_")
    return head + "".join(part.title() for part in rest)


class Taint(ApiModel):
    key: Annotated[str, Field(min_length=1)]
    value: str | None = None
    effect: Literal["NoSchedule", "NoExecute"]


class InfinibandFabric(ApiModel):
    fabric: Annotated[str, Field(min_length=1, max_length=63)]


class Fabric(ApiModel):
    type: Literal["None", "EFA", "InfiniBand"] = "None"
    # Ours: pools sharing a non-empty domain are one interconnect, so an engine may span them.
    domain: Annotated[str, Field(min_length=1, max_length=63)] | None = None
    infiniband: InfinibandFabric | None = None

    @model_validator(mode="after")
    def _ib_block(self) -> Fabric:
        if self.infiniband is not None and self.type != "InfiniBand":
            raise ValueError("fabric.infiniband is only allowed when fabric.type is InfiniBand")
        return self


class CapacityBlock(ApiModel):
    capacity_reservation_id: Annotated[str, Field(min_length=4, max_length=64, pattern=r"^cr-[0-9a-f]+$")]


class PoolLabel(ApiModel):
    """Ours: how nodes of a pool get `modelplane.ai/pool` on clusters the program doesn't provision.

    Apply: the program labels the nodes matched by `nodeSelector`.
    Present: the platform team declares its nodes already carry the label.
    """

    mode: Literal["Apply", "Present"]
    node_selector: LabelSelector | None = None

    @model_validator(mode="after")
    def _selector(self) -> PoolLabel:
        if self.mode == "Apply" and not (self.node_selector and self.node_selector.match_labels):
            raise ValueError(
                "poolLabel.mode Apply needs poolLabel.nodeSelector.matchLabels naming the pool's nodes "
                "(e.g. {node.kubernetes.io/instance-type: p5.48xlarge})"
            )
        return self


class NodePool(ApiModel):
    name: Annotated[str, Field(min_length=1, max_length=40)]
    class_name: Annotated[str, Field(min_length=1, max_length=253)] | None = None
    role: Literal["GPU", "System"] | None = None
    instance_type: str | None = None
    node_count: Annotated[int, Field(ge=0)] = 1
    min_node_count: Annotated[int, Field(ge=0)] | None = None
    max_node_count: Annotated[int, Field(ge=1)] | None = None
    zones: list[str] = Field(default_factory=list)
    capacity_block: CapacityBlock | None = None
    fabric: Fabric = Field(default_factory=Fabric)
    pool_label: PoolLabel | None = None

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        # The pool name is the value of the `modelplane.ai/pool` node label, and part of the
        # EKS node group's and GKE node pool's names, which take lowercase letters, digits, '-'.
        check_label_value(value, "node pool name")
        return check_dns_label(value, "node pool name")

    @model_validator(mode="after")
    def _class(self) -> NodePool:
        if self.role != "System" and not self.class_name:
            raise ValueError(f"node pool {self.name!r} needs className (the InferenceClass of its nodes)")
        return self

    @property
    def is_gpu_pool(self) -> bool:
        return self.role != "System" and bool(self.class_name)

    @property
    def declared_nodes(self) -> int:
        """The reference's advertised capacity: maxNodeCount when set, else nodeCount."""
        return self.max_node_count if self.max_node_count else self.node_count

    @property
    def size_bounds(self) -> tuple[int, int, int]:
        """(fewest, declared, most) nodes the pool may run: minNodeCount (else nodeCount), nodeCount,
        maxNodeCount (else nodeCount); the most is exactly what the scheduler counts (declared_nodes)."""
        low = min(self.node_count if self.min_node_count is None else self.min_node_count, self.node_count)
        return low, self.node_count, max(self.max_node_count or self.node_count, self.node_count, 1)

    @property
    def can_grow(self) -> bool:
        """A node autoscaler resizes this pool (its most is above its fewest)."""
        low, _, high = self.size_bounds
        return high > low


class PlacementMetadata(ApiModel):
    labels: dict[str, str] = Field(default_factory=dict)

    @field_validator("labels")
    @classmethod
    def _labels(cls, labels: dict[str, str]) -> dict[str, str]:
        return check_user_labels(labels, "placement.metadata.labels")


class ClusterPlacement(ApiModel):
    metadata: PlacementMetadata = Field(default_factory=PlacementMetadata)


class ClusterGateway(ApiModel):
    hostname: Annotated[str, Field(min_length=1, max_length=253, pattern=DNS_NAME_PATTERN)] | None = None


class InferenceClusterSpec(ApiModel):
    cluster: ClusterSource
    stack: Literal["Default", "Standard", "Dynamo"] = "Default"
    taints: list[Taint] = Field(default_factory=list)
    node_pools: Annotated[list[NodePool], Field(max_length=8)] = Field(default_factory=list)
    placement: ClusterPlacement | None = None
    gateway: ClusterGateway | None = None

    @field_validator("stack")
    @classmethod
    def _stack(cls, value: str) -> str:
        # The reference calls the default stack "Standard"; both spellings mean the same.
        return "Default" if value == "Standard" else value

    @field_validator("taints")
    @classmethod
    def _unique_taints(cls, taints: list[Taint]) -> list[Taint]:
        seen = set()
        for taint in taints:
            if (taint.key, taint.effect) in seen:
                raise ValueError(f"taint {taint.key}:{taint.effect} appears twice; (key, effect) must be unique")
            seen.add((taint.key, taint.effect))
        return taints

    @field_validator("node_pools")
    @classmethod
    def _unique_pools(cls, pools: list[NodePool]) -> list[NodePool]:
        return check_unique(pools, "node pool names")


class ClusterMeta(ObjectMeta):
    """A cluster's name is the value of `modelplane.ai/cluster` on every object rendered for it
    and the start of its node groups', node pools' and kind nodes' names: a DNS label. It also
    names its workload gateway's Service, `<name>-gateway`, which Kubernetes requires to be a
    DNS-1035 label (kubernetes/kubernetes pkg/apis/core/validation/validation.go
    `ValidateServiceName = NameIsDNS1035Label`, in force on 1.35, the EKS default, where
    RelaxedServiceNameValidation is alpha and off): so it starts with a letter and leaves room
    for the suffix."""

    @field_validator("name")
    @classmethod
    def _dns_label(cls, value: str) -> str:
        check_dns_label(value, "metadata.name")
        service = f"the cluster's gateway Service ('<name>{GATEWAY_SERVICE_SUFFIX}')"
        check_dns1035_label(value, "metadata.name", service)
        longest = 63 - len(GATEWAY_SERVICE_SUFFIX)
        if len(value) > longest:
            raise ValueError(f"metadata.name {quoted(value)} is {len(value)} characters long; it names {service}, "
                             f"which holds at most 63 characters, so the name may have at most {longest}")
        return value


class InferenceCluster(KindObject):
    kind: Literal["InferenceCluster"]
    metadata: ClusterMeta
    spec: InferenceClusterSpec

    @model_validator(mode="after")
    def _eks_node_group_names(self) -> InferenceCluster:
        if self.spec.cluster.source != "EKS":
            return self
        for pool in [*self.spec.node_pools, None]:
            group = f"{self.metadata.name}-{pool.name if pool else 'system'}"
            if len(group) + AUTONAME_SUFFIX > EKS_NODE_GROUP_NAME_MAX:
                raise ValueError(
                    f"the EKS node group of pool {pool.name if pool else 'system'!r} is named {group!r} plus "
                    f"{AUTONAME_SUFFIX} characters Pulumi adds, {len(group) + AUTONAME_SUFFIX} in all, and EKS "
                    f"allows {EKS_NODE_GROUP_NAME_MAX}; shorten the cluster or pool name")
        return self

    @property
    def source(self) -> str:
        return self.spec.cluster.source

    @property
    def gpu_pools(self) -> list[NodePool]:
        return [p for p in self.spec.node_pools if p.is_gpu_pool]

    @property
    def autoscaled_pools(self) -> list[NodePool]:
        """The GPU pools the cluster-autoscaler resizes: on EKS, those that can grow (the program
        installs the autoscaler for them; other sources resize their pools themselves or not at all)."""
        return [p for p in self.gpu_pools if p.can_grow] if self.source == "EKS" else []

    def pool(self, name: str) -> NodePool | None:
        return next((p for p in self.spec.node_pools if p.name == name), None)
