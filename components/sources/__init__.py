"""Cluster sources: each returns the kubeconfig (a secret Output) of the cluster it
creates; the InferenceCluster component turns that into the cluster's provider."""

from __future__ import annotations

from typing import Any

import pulumi

from components.errors import ResourceError
from modelplane.api import Fleet, NodePool


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
