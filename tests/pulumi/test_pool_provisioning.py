"""A cloud source builds a pool from its class's provisioning block, and names what's missing."""

import pulumi
import pytest

from components.sources import pool_provisioning
from modelplane.api import load_manifests


def test_pool_provisioning_returns_the_block_or_names_what_is_missing():
    fleet = load_manifests("examples/aws")
    cluster = next(c for c in fleet.clusters.values() if c.source == "EKS")
    pool = cluster.gpu_pools[0]
    prov = pool_provisioning(cluster.name, pool, fleet, "eks", "instanceType, accelerator", None)
    assert prov.instance_type
    # a RunError: the program's error is printed cleanly, naming the class's manifest
    with pytest.raises(pulumi.RunError, match=rf"examples/aws/.*#\d+: InferenceCluster {cluster.name} pool "
                                              rf"{pool.name}: class {pool.class_name} has no "
                                              r"provisioning.gke block \(machineType, accelerator\)"):
        pool_provisioning(cluster.name, pool, fleet, "gke", "machineType, accelerator", None)
