"""Cluster sources: each returns the kubeconfig (a secret Output) of the cluster it
creates; the InferenceCluster component turns that into the cluster's provider."""

from typing import Any


def pool_provisioning(cluster: str, pool: Any, fleet: Any, block: str, needs: str) -> Any:
    """The `provisioning.<block>` of a pool's InferenceClass: what a cloud source builds
    the pool's nodes from. A class without it can't be provisioned there, so say which."""
    klass = fleet.classes.get(pool.class_name)
    prov = getattr(klass.spec.provisioning, block) if klass and klass.spec.provisioning else None
    if prov is None:
        raise ValueError(f"InferenceCluster {cluster} pool {pool.name}: class {pool.class_name} has no "
                         f"provisioning.{block} block ({needs})")
    return prov
