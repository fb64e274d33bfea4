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


# The CSI provisioners behind the classes the program creates on the clouds it provisions:
# the EFS CSI driver (kubernetes-sigs/aws-efs-csi-driver, dynamic provisioning with access
# points: provisioningMode efs-ap, fileSystemId, directoryPerms) and GKE's Filestore CSI driver
# (https://cloud.google.com/filestore/docs/csi-driver: the cluster's VPC as `network`).
EFS_PROVISIONER = "efs.csi.aws.com"
FILESTORE_PROVISIONER = "filestore.csi.storage.gke.io"
# Filestore instances start at 1 TiB (same page, "minimum instance size is 1 TiB"); a cache
# PVC asks for at least that much on GKE, so what it asks for is what it gets.
MIN_CACHE_GIB = {"GKE": 1024}


def cache_request_gib(cluster: InferenceCluster, size_gib: int) -> int:
    """What a cache PVC requests on this cluster: its size, at least the storage's minimum."""
    return max(size_gib, MIN_CACHE_GIB.get(cluster.spec.cluster.source, 0))


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
