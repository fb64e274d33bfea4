"""The NVIDIA DRA kubelet plugin's node affinity on simulated GKE clusters (examples/gcp); the EKS
half is in test_fleet.py. A module of its own so that its fleet and test_fleet.py's EKS fleet are
never up at once (one fleet at a time holds the run's peak memory: docs/ci.md#memory)."""

from __future__ import annotations

from typing import Any

import pytest

from .conftest import REPO
from .stack import assert_kubelet_plugin_runs_on_the_gpu_nodes_only

pytestmark = pytest.mark.sim

GCP = REPO / "examples" / "gcp"


def test_nvidia_dra_kubelet_plugin_node_affinity_matches_every_simulated_gke_gpu_node(start_fleet: Any) -> None:
    """Rule: the NVIDIA DRA driver's kubelet plugin (the DaemonSet that publishes ResourceSlices)
    runs only on nodes matching its chart's required node affinity, tolerating the GPU taint
    (sigs.k8s.io/dra-driver-nvidia-gpu v0.4.1, deployments/helm/dra-driver-nvidia-gpu/values.yaml,
    `kubeletPlugin.affinity` and `kubeletPlugin.tolerations`, held in modelplane.clouds.nvidia).
    On simulated GKE clusters, whose nodes carry exactly the labels our node pools give real ones,
    the DaemonSet gets a pod on every GPU node and none on the system node."""
    _, gcp = start_fleet(GCP)
    assert_kubelet_plugin_runs_on_the_gpu_nodes_only(GCP, gcp, "GKE")
