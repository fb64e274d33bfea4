"""kubernetesVersion of EKS/GKE clusters, checked at load against what the program renders there,
and the cluster-autoscaler image of the cluster's own minor (modelplane.api.kubernetes_versions)."""

from __future__ import annotations

import pytest

from modelplane.api import ManifestError, load_manifest_text
from modelplane.api.kubernetes_versions import AUTOSCALER_IMAGE_TAGS, EKS_DEFAULT_VERSION, MIN_DRA_V1
from modelplane.render.serving import chart_specs
from tests.unit.render.cloudfleet import gpu_class

SYNTHETIC = """
apiVersion: modelplane.ai/v1alpha1
kind: InferenceClass
metadata: {name: synthetic}
spec:
  provisioning: {provider: EKS, eks: {instanceType: g5.12xlarge, accelerator: {type: nvidia-a10g, count: 4}}}
  devices: [{name: gpu, claim: Synthetic, driver: gpu.nvidia.com, count: 4}]
"""


def cluster(source: str, version: str | None, *, grows: bool = False, klass: str = "p5") -> str:
    block = f"{source.lower()}: {{region: {'us-east-1' if source == 'EKS' else 'us-central1'}"
    block += f", kubernetesVersion: '{version}'}}" if version is not None else "}"
    zones = "[us-east-1a]" if source == "EKS" else "[us-central1-a]"
    size = "nodeCount: 1, maxNodeCount: 3" if grows else "nodeCount: 1"
    return f"""
apiVersion: modelplane.ai/v1alpha1
kind: InferenceCluster
metadata: {{name: c1}}
spec:
  cluster: {{source: {source}, {block}}}
  nodePools: [{{name: gpu, className: {klass}, {size}, zones: {zones}}}]
"""


def fleet_text(source: str, version: str | None, **kwargs: object) -> str:
    klass = gpu_class("p5", source, "p5.48xlarge" if source == "EKS" else "a3-highgpu-8g")
    return "---".join([klass, SYNTHETIC, cluster(source, version, **kwargs)])  # type: ignore[arg-type]


def _error(text: str) -> str:
    with pytest.raises(ManifestError) as caught:
        load_manifest_text(text, source="fleet.yaml")
    return str(caught.value)


@pytest.mark.parametrize("source", ["EKS", "GKE"])
def test_a_cluster_older_than_dra_v1_is_refused_at_load_when_it_runs_dra_pools(source: str) -> None:
    """resource.k8s.io/v1 is served from Kubernetes 1.34 (k8s-api-shapes.md §1.1, KEP-4381 GA in
    1.34); "Manage EFA devices on Amazon EKS": the EFA DRA driver's minimum Kubernetes version is
    1.34; "Prepare GKE infrastructure for DRA workloads": the cluster must run 1.34 or later. EKS
    1.33 took the charts and refused every ResourceClaimTemplate (issue 27 item 5)."""
    message = _error(fleet_text(source, "1.33"))
    assert f"spec.cluster.{source.lower()}.kubernetesVersion" in message
    assert "predates DRA resource.k8s.io/v1 (served from 1.34)" in message
    assert "Fix: kubernetesVersion: '1.34'" in message
    assert MIN_DRA_V1 == (1, 34)
    load_manifest_text(fleet_text(source, "1.34"))


def test_a_cluster_without_dra_pools_may_run_an_older_version() -> None:
    """Nothing rendered for a Synthetic-only cluster uses resource.k8s.io."""
    load_manifest_text(fleet_text("EKS", "1.33", klass="synthetic"))


@pytest.mark.parametrize("version", ["1.35.1", "v1.35", "1.35-eks", "2.0", "latest", ""])
def test_an_eks_version_is_major_dot_minor_only(version: str) -> None:
    """EKS API CreateCluster `version`: "The desired Kubernetes version for your cluster", e.g.
    1.35; a patch or a prefix is refused by EKS at `up`, so the load refuses it with the fix."""
    if version == "":
        load_manifest_text(fleet_text("EKS", version))   # empty: the default, as when unset
        return
    message = _error(fleet_text("EKS", version))
    assert "is not an EKS version: EKS takes '<major>.<minor>' only" in message


@pytest.mark.parametrize("version", ["1.35", "1.35.2", "1.35.2-gke.1842000", "latest"])
def test_gke_versions_take_the_spellings_min_master_version_takes(version: str) -> None:
    """google_container_cluster `min_master_version` (pulumi_gcp container.Cluster): a version
    prefix such as 1.35, a full version 1.35.2-gke.N, or `latest`."""
    load_manifest_text(fleet_text("GKE", version))


def test_a_gke_version_in_another_spelling_is_refused() -> None:
    assert "is not a GKE version" in _error(fleet_text("GKE", "1.35.x"))


def _autoscaler_values(version: str | None) -> dict:
    fleet = load_manifest_text(fleet_text("EKS", version, grows=True))
    [chart] = [c for c in chart_specs(fleet.clusters["c1"], fleet) if c.name == "cluster-autoscaler"]
    return dict(chart.values)


@pytest.mark.parametrize("version, tag", [("1.34", "v1.34.5"), ("1.35", "v1.35.2"), ("1.36", "v1.36.1"),
                                          (None, AUTOSCALER_IMAGE_TAGS[(1, 35)])])
def test_the_cluster_autoscaler_image_is_the_release_of_the_clusters_minor(version: str | None, tag: str) -> None:
    """kubernetes/autoscaler cluster-autoscaler/README.md "Releases": "We recommend using Cluster
    Autoscaler with the Kubernetes control plane version for which it was meant" (1.34.x with
    1.34.x); chart 9.59.0 (values.yaml `image.tag`) defaults to v1.35.0 whatever the cluster.
    Tags cluster-autoscaler-1.34.5/-1.35.2/-1.36.1 are the newest patches; config/flags/flags.go:
    `enable-dynamic-resource-allocation` defaults to false in 1.34.5 and is locked to true in
    1.35.2, so it is set true for every minor (a 1.34 autoscaler would ignore DRA claims)."""
    values = _autoscaler_values(version)
    assert values["image"] == {"tag": tag}
    assert values["extraArgs"] == {"enable-dynamic-resource-allocation": True}
    assert EKS_DEFAULT_VERSION == "1.35"


def test_an_autoscaled_eks_cluster_on_a_minor_without_a_pinned_autoscaler_is_refused_at_load() -> None:
    message = _error(fleet_text("EKS", "1.37", grows=True))
    assert "no release is pinned for 1.37 (pinned: 1.34, 1.35, 1.36" in message
    load_manifest_text(fleet_text("EKS", "1.37"))     # fixed-size pools: no autoscaler to pin
