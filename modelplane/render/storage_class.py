"""The ReadWriteMany StorageClass the program creates on the clusters it provisions; its
name and provisioners are the storage rule's (modelplane.storage)."""

from __future__ import annotations

from modelplane.storage import EFS_PROVISIONER, FILESTORE_PROVISIONER, STORAGE_CLASSES
from modelplane.vocabulary import LABEL_MANAGED_BY, MANAGED_BY, Manifest


def storage_class_manifest(source: str, *, file_system_id: object = None, network: str | None = None
                           ) -> Manifest:
    """The ReadWriteMany StorageClass the program creates on an EKS or GKE cluster, named
    as the cache PVCs name it. `file_system_id` (EKS) may be a Pulumi Output: the manifest
    is plain data the component registers."""
    meta = {"name": STORAGE_CLASSES[source], "labels": {LABEL_MANAGED_BY: MANAGED_BY}}
    if source == "EKS":
        return {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": meta,
                "provisioner": EFS_PROVISIONER, "reclaimPolicy": "Delete", "volumeBindingMode": "Immediate",
                "parameters": {"provisioningMode": "efs-ap", "fileSystemId": file_system_id,
                               "directoryPerms": "700"}}
    if source == "GKE":
        return {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": meta,
                "provisioner": FILESTORE_PROVISIONER, "reclaimPolicy": "Delete", "volumeBindingMode": "Immediate",
                "allowVolumeExpansion": True,
                "parameters": {"tier": "enterprise", "network": network or "default"}}
    raise ValueError(f"the program creates no cache StorageClass on {source} clusters")
