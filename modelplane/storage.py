"""Where a ModelCache can be staged: on the cluster's ReadWriteMany storage (semantics §5).

One rule for the scheduler, which filters out a cluster that cannot stage a replica's
cache, and for the renderers, which draw the cache's PVC with this storage class.
"""

from __future__ import annotations

from modelplane.api import InferenceCluster

# RWX StorageClasses the serving stack installs per source; Vultr has none, and an
# Existing cluster names its own.
STORAGE_CLASSES = {
    "EKS": "modelplane-rwx-efs",
    "GKE": "modelplane-rwx",
    "AKS": "modelplane-rwx-fs",
    "Nebius": "modelplane-rwx-fs",
    "Kind": "standard",
}


def cache_storage_class(cluster: InferenceCluster) -> str | None:
    """The StorageClass a ModelCache PVC gets on this cluster; None: caches cannot be staged."""
    source = cluster.spec.cluster.source
    if source == "Existing":
        existing = cluster.spec.cluster.existing
        return existing.cache.storage_class_name if existing and existing.cache else None
    return STORAGE_CLASSES.get(source)


def cache_access_mode(cluster: InferenceCluster) -> str:
    # Kind's `standard` class is rancher local-path, which refuses ReadWriteMany ("Only
    # support ReadWriteOnce access mode"). Node-local RWO still serves every pod on the
    # node the volume lands on, which is what a local Kind cluster has.
    return "ReadWriteOnce" if cluster.spec.cluster.source == "Kind" else "ReadWriteMany"


def cache_storage_problem(cluster: InferenceCluster) -> str | None:
    """Why no ModelCache can be staged on this cluster, with the fix; None when it can."""
    if cache_storage_class(cluster) is not None:
        return None
    source = cluster.spec.cluster.source
    if source == "Existing":
        return ("it has no ReadWriteMany storage: set spec.cluster.existing.cache.storageClassName "
                "to a ReadWriteMany StorageClass")
    return f"{source} clusters have no ReadWriteMany storage for caches"
