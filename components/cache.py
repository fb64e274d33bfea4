"""ModelCache: on every cluster the plan stages it, the PVC and staging Job the core
renders, plus (live stacks) the Hugging Face token as the Secret the Job reads."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.k8s import ClusterReady, register_ready, resource_name
from modelplane.api import ModelCache as CacheSpec
from modelplane.plan import FleetPlan
from modelplane.render.cache import hugging_face
from modelplane.render.meta import component_labels
from modelplane.vocabulary import LABEL_CLUSTER, LABEL_MODELCACHE


@dataclass(kw_only=True)
class ModelCacheArgs:
    cache: CacheSpec
    plan: pulumi.Output[FleetPlan]
    providers: Mapping[str, pulumi.ProviderResource]          # cluster -> its Kubernetes provider
    # cluster -> what its objects wait for; the clusters this stack applies
    ready: Mapping[str, pulumi.Output[ClusterReady]] = field(default_factory=dict)
    hf_token: pulumi.Input[str] | None = None
    # GitOps: the token Secret is the user's to create; nothing holding it is rendered.
    write_secrets: bool = True


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
        here = sorted(args.ready)

        def register(values: list[Any]) -> list[str]:
            fp: FleetPlan = values[0]
            readies = dict(zip(here, values[1:], strict=True))
            registered = []
            for cluster, plan in fp.clusters.items():
                for staged in plan.caches:
                    if (staged.namespace, staged.name) != (namespace, cname):
                        continue
                    ready, provider = readies[cluster], args.providers[cluster]
                    if staged.token is not None and args.hf_token is not None and args.write_secrets:
                        secret = k8s.core.v1.Secret(
                            resource_name(name, cluster, "auth"),
                            metadata={"name": staged.token.name, "namespace": staged.token.namespace,
                                      "labels": component_labels("model-cache", {LABEL_MODELCACHE: cname,
                                                                                 LABEL_CLUSTER: cluster})},
                            string_data={staged.token.key: pulumi.Output.secret(args.hf_token)},
                            opts=pulumi.ResourceOptions(parent=self, provider=provider,
                                                        depends_on=ready.in_namespace(staged.token.namespace)))
                        ready = ready.with_base([secret])
                    register_ready(cluster, staged.objects, ready, provider, self)
                    registered.append(cluster)
            return registered

        registered = pulumi.Output.all(args.plan, *[args.ready[c] for c in here]).apply(register)
        self.register_outputs({"clusters": registered})
