"""Cluster sources: each returns what the InferenceCluster component needs from the cluster it
creates: its kubeconfig (a secret Output) and the cache StorageClass to register on it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi

from components.errors import ResourceError
from modelplane.api import Fleet, NodePool
from modelplane.vocabulary import Manifest


@dataclass
class ProvisionedCluster:
    kubeconfig: pulumi.Output[str]
    # The ReadWriteMany StorageClass for ModelCache PVCs (modelplane.storage), registered on
    # the cluster's own provider; values may be Outputs (the EFS file system's id).
    storage_class: Manifest | None = None


def pool_provisioning(cluster: str, pool: NodePool, fleet: Fleet, block: str, needs: str,
                      resource: pulumi.Resource | None) -> Any:
    """The `provisioning.<block>` of a pool's InferenceClass: what a cloud source builds
    the pool's nodes from. A class without it can't be provisioned there, so say which."""
    klass = fleet.classes.get(pool.class_name or "")
    prov = getattr(klass.spec.provisioning, block) if klass and klass.spec.provisioning else None
    if prov is None:
        where = f"{fleet.source_of(klass)}: " if klass is not None else ""
        raise ResourceError(f"{where}InferenceCluster {cluster} pool {pool.name}: class {pool.class_name} has no "
                            f"provisioning.{block} block ({needs})", resource)
    return prov
