"""Registering rendered Kubernetes manifests: one resource per object, on a cluster's provider."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import pulumi
import pulumi_kubernetes as k8s

from modelplane.json_types import JsonMapping, JsonValue
from modelplane.vocabulary import Manifest


def resource_name(*parts: str) -> str:
    """A Pulumi resource name from readable parts (Kubernetes names already are safe)."""
    return re.sub(r"[^A-Za-z0-9_.-]", "-", "-".join(p for p in parts if p))


def type_token(api_version: str, kind: str) -> str:
    group, _, version = api_version.rpartition("/")
    return f"kubernetes:{group or 'core'}/{version}:{kind}"


class RenderedObject(pulumi.CustomResource):
    """Any rendered manifest, registered as the Kubernetes resource of its kind
    (`kubernetes:<group>/<version>:<Kind>`, what the typed classes register too).

    Not a yaml/v2 ConfigGroup: that needs every kind's scope before it can register its
    children, which a render-to-directory provider without a cluster cannot learn for
    CRDs (LeaderWorkerSet, PodCliqueSet) or kinds newer than the plugin
    (resource.k8s.io/v1)."""

    def __init__(self, name: str, obj: Manifest, opts: pulumi.ResourceOptions | None = None) -> None:
        # The plugin version the typed classes pin; the SDK leaves this helper untyped. How long
        # a workload is awaited is its rendered `pulumi.com/timeoutSeconds` (modelplane.render.readiness).
        extra = pulumi.ResourceOptions(version=k8s._utilities.get_version())  # type: ignore[no-untyped-call]
        super().__init__(type_token(obj["apiVersion"], obj["kind"]), name, plain(obj),
                         pulumi.ResourceOptions.merge(opts, extra))


def object_name(cluster: str, obj: JsonMapping) -> str:
    """`<cluster>:<namespace>/<name>`: unique per kind across clusters (the kind is in the
    type token), readable in previews."""
    meta = obj["metadata"]
    namespace = meta.get("namespace")
    return f"{cluster}:{namespace}/{meta['name']}" if namespace else f"{cluster}:{meta['name']}"


def register_objects(cluster: str, objs: Iterable[Manifest], opts: pulumi.ResourceOptions) -> list[RenderedObject]:
    return [RenderedObject(object_name(cluster, obj), obj, opts) for obj in objs]


def plain(value: JsonValue) -> JsonValue:
    """Deep copy of a manifest with only JSON types (rendered dicts may hold tuples)."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


@dataclass(frozen=True)
class ClusterReady:
    """What a cluster's objects wait for: every object waits for `base` (the cluster's
    `modelplane-system` namespace, its serving stack and charts), a namespaced one also for
    its namespace's own objects (the Namespace, the mock engine's ConfigMap, ModelExpress).
    Narrow on purpose: one object depending on every namespace of its cluster cost the
    program a dependency walk per pair (preview time at scale, benchmarks/scale_engine.py)."""

    base: tuple[pulumi.Resource, ...] = ()
    namespaces: Mapping[str, tuple[pulumi.Resource, ...]] = field(default_factory=dict)

    def of(self, obj: Manifest) -> list[pulumi.Resource]:
        return self.in_namespace(obj["metadata"].get("namespace"))

    def in_namespace(self, namespace: str | None) -> list[pulumi.Resource]:
        return [*self.base, *self.namespaces.get(namespace, ())] if namespace else list(self.base)

    def with_base(self, extra: Sequence[pulumi.Resource]) -> ClusterReady:
        return ClusterReady((*self.base, *extra), self.namespaces)


def register_ready(cluster: str, objs: Iterable[Manifest], ready: ClusterReady, provider: pulumi.ProviderResource,
                   parent: pulumi.Resource) -> list[RenderedObject]:
    """Each object on the cluster's provider, after what it waits for."""
    return [RenderedObject(object_name(cluster, obj), obj, pulumi.ResourceOptions(
        parent=parent, provider=provider, depends_on=ready.of(obj))) for obj in objs]
