"""ModelCache: on every cluster the plan stages it, the PVC and staging Job the core
renders, plus (live stacks) the Hugging Face token as the Secret the Job reads."""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pulumi
import pulumi_kubernetes as k8s

from components.k8s import register_objects, resource_name
from modelplane.api import ModelCache as CacheSpec
from modelplane.plan import FleetPlan
from modelplane.render.cache import hugging_face
from modelplane.render.meta import LABEL_CLUSTER, LABEL_MODELCACHE, component_labels


@dataclass(kw_only=True)
class ModelCacheArgs:
    cache: CacheSpec
    plan: pulumi.Output[FleetPlan]
    providers: Mapping[str, pulumi.ProviderResource]          # cluster -> its Kubernetes provider
    # cluster -> what its objects wait for (namespaces, serving stack)
    ready: Mapping[str, pulumi.Input[Sequence[pulumi.Resource]]] = field(default_factory=dict)
    hf_token: pulumi.Input[str] | None = None
    # GitOps: the token Secret is the user's to create; nothing holding it is rendered.
    write_secrets: bool = True


def _and(extra: pulumi.Resource, deps: Sequence[pulumi.Resource]) -> list[pulumi.Resource]:
    return [*deps, extra]


class ModelCache(pulumi.ComponentResource):
    clusters: pulumi.Output[list[str]]

    def __init__(self, name: str, args: ModelCacheArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        cache = args.cache
        hf = hugging_face(cache)
        namespace, cname = cache.metadata.namespace or "default", cache.metadata.name
        self.clusters = args.plan.apply(lambda fp: fp.cache_clusters(namespace, cname))
        props = {"namespace": namespace, "repo": hf.repo, "revision": hf.revision or "",
                 "sizeGiB": hf.size_gib, "clusters": self.clusters, "manifest": cache.to_manifest()}
        super().__init__("modelplane:index:ModelCache", name, props, opts)
        if hf.auth_secret is not None and args.hf_token is None and args.write_secrets:
            pulumi.log.warn(f"ModelCache {namespace}/{cname} needs a Hugging Face token "
                            "(`pulumi config set --secret hfToken ...`); its staging Jobs will fail without it", self)

        def register(fp: FleetPlan) -> list[str]:
            registered = []
            for cluster, plan in fp.clusters.items():
                for staged in plan.caches:
                    if (staged.namespace, staged.name) != (namespace, cname):
                        continue
                    ready = pulumi.Output.from_input(args.ready.get(cluster, []))
                    provider = args.providers[cluster]
                    if staged.token is not None and args.hf_token is not None and args.write_secrets:
                        secret = k8s.core.v1.Secret(
                            resource_name(name, cluster, "auth"),
                            metadata={"name": staged.token.name, "namespace": staged.token.namespace,
                                      "labels": component_labels("model-cache", {LABEL_MODELCACHE: cname,
                                                                                 LABEL_CLUSTER: cluster})},
                            string_data={staged.token.key: pulumi.Output.secret(args.hf_token)},
                            opts=pulumi.ResourceOptions(parent=self, provider=provider, depends_on=ready))
                        ready = ready.apply(functools.partial(_and, secret))
                    register_objects(cluster, staged.objects,
                                     pulumi.ResourceOptions(parent=self, provider=provider, depends_on=ready))
                    registered.append(cluster)
            return registered

        self.register_outputs({"clusters": args.plan.apply(register)})
