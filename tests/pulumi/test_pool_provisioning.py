"""A cloud source builds a pool from its class's provisioning block, and names what's missing
(the rule: modelplane.clouds.provisioning, which the cloud-pool-provisioning check shares)."""

from pathlib import Path

import pulumi
import pytest

from components.sources import pool_provisioning
from modelplane.api import load_manifest_text, load_manifests


def test_pool_provisioning_returns_the_block_or_names_what_is_missing():
    fleet = load_manifests("examples/aws")
    cluster = next(c for c in fleet.clusters.values() if c.source == "EKS")
    pool = cluster.gpu_pools[0]
    prov = pool_provisioning(cluster, pool, fleet, None)
    assert prov.instance_type
    # the same class on a GKE cluster has no provisioning.gke block
    docs = Path("examples/aws/fleet.yaml").read_text().split("\n---\n")
    classes = [d for d in docs if "kind: InferenceClass" in d]
    gke = load_manifest_text("\n---\n".join(classes + [
        "apiVersion: modelplane.ai/v1alpha1\nkind: InferenceCluster\nmetadata: {name: g1}\n"
        "spec:\n  cluster: {source: GKE, gke: {region: us-central1}}\n"
        "  nodePools: [{name: p1, className: h100-eks, nodeCount: 1, zones: [us-central1-a]}]\n"]),
        source="examples/aws/fleet.yaml")
    # a RunError: the program's error is printed cleanly, naming the class's manifest
    with pytest.raises(pulumi.RunError, match=r"examples/aws/fleet.yaml#\d+: InferenceCluster g1 pool p1: class "
                                              r"h100-eks has no provisioning.gke block \(machineType, accelerator\)"):
        pool_provisioning(gke.clusters["g1"], gke.clusters["g1"].gpu_pools[0], gke, None)
