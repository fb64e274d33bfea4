"""Cluster sources: each returns what the InferenceCluster component needs from the cluster it
creates: its kubeconfig (a secret Output) and the cache StorageClass to register on it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pulumi

from components.errors import ResourceError
from modelplane.api import Fleet, InferenceCluster, NodePool
from modelplane.clouds.provisioning import pool_provisioning_block, provisioning_problem
from modelplane.vocabulary import Manifest


@dataclass
class ProvisionedCluster:
    kubeconfig: pulumi.Output[str]
    # The ReadWriteMany StorageClass for ModelCache PVCs (modelplane.storage), registered on
    # the cluster's own provider; values may be Outputs (the EFS file system's id).
    storage_class: Manifest | None = None
    # The cloud's name of the cluster (Pulumi's auto-name, unique per stack); None where no
    # chart needs it.
    physical_name: pulumi.Output[str] | None = None
    # Chart name -> cloud resources its pods need before they are created (the serving stack
    # installs the chart after them): e.g. the cluster-autoscaler's Pod Identity association.
    chart_dependencies: dict[str, list[pulumi.Resource]] = field(default_factory=dict)


def pool_provisioning(cluster: InferenceCluster, pool: NodePool, fleet: Fleet,
                      resource: pulumi.Resource | None) -> Any:
    """The `provisioning.<block>` of a pool's InferenceClass: what a cloud source builds
    the pool's nodes from (modelplane.clouds.provisioning). A class without it can't be
    provisioned there, so say which."""
    problem = provisioning_problem(fleet, cluster, pool)
    if problem is not None:
        klass = fleet.classes.get(pool.class_name or "")
        where = f"{fleet.source_of(klass)}: " if klass is not None else ""
        raise ResourceError(f"{where}{problem}", resource)
    return pool_provisioning_block(fleet, cluster, pool)
