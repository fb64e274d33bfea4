"""ModelCache: per matching cluster a ReadWriteMany PVC and the staging Job (rendered
by modelplane.render), plus the Hugging Face token as a Secret the Job reads."""

from __future__ import annotations

from typing import Any, Mapping

import pulumi
import pulumi_kubernetes as k8s

from components.k8s import plain, register_objects, resource_name
from components.labels import k8s_labels


def cache_clusters(fleet: Any, cache: Any) -> list[str]:
    """Clusters the cache is staged on: its selector matches and the cluster has RWX storage."""
    from modelplane.render import cache_storage_class

    selector = cache.spec.cluster_selector
    return [name for name, cluster in sorted(fleet.clusters.items())
            if (selector is None or selector.matches(cluster.metadata.labels or {}))
            and cache_storage_class(cluster) is not None]


class ModelCache(pulumi.ComponentResource):
    def __init__(self, name: str, fleet: Any, cache: Any, clusters: Mapping[str, Any],
                 hf_token: pulumi.Input[str] | None, depends_on: Mapping[str, list[pulumi.Resource]],
                 opts: pulumi.ResourceOptions | None = None):
        from modelplane.render import render_cache
        from modelplane.render.names import cache_secret_name

        hf = cache.spec.hugging_face
        namespace = cache.metadata.namespace or "default"
        targets = [c for c in cache_clusters(fleet, cache) if c in clusters]
        props = {"namespace": namespace, "repo": hf.repo, "revision": hf.revision or "",
                 "sizeGiB": hf.size_gib, "clusters": targets, "manifest": cache.to_manifest()}
        super().__init__("modelplane:index:ModelCache", name, props, opts)
        if hf.auth_secret is not None and hf_token is None:
            pulumi.log.warn(f"ModelCache {namespace}/{cache.metadata.name} needs a Hugging Face token "
                            "(`pulumi config set --secret hfToken ...`); its staging Jobs will fail without it", self)
        self.secrets: dict[str, k8s.core.v1.Secret] = {}
        for cluster in targets:
            provider = clusters[cluster].provider
            deps = list(depends_on.get(cluster, []))
            if hf.auth_secret is not None and hf_token is not None:
                secret = k8s.core.v1.Secret(
                    resource_name(name, cluster, "auth"),
                    metadata={"name": cache_secret_name(namespace, cache.metadata.name), "namespace": namespace,
                              "labels": k8s_labels("model-cache", {"modelplane.ai/modelcache": cache.metadata.name,
                                                                  "modelplane.ai/cluster": cluster})},
                    string_data={hf.auth_secret.key: pulumi.Output.secret(hf_token)},
                    opts=pulumi.ResourceOptions(parent=self, provider=provider, depends_on=deps))
                self.secrets[cluster] = secret
                deps = deps + [secret]
            objs = plain(render_cache(fleet, cache, fleet.clusters[cluster]))
            register_objects(cluster, objs, pulumi.ResourceOptions(parent=self, provider=provider, depends_on=deps))
        self.register_outputs({"clusters": targets})
