"""One home for the serving stack: what the program installs on a cluster besides the models (each
chart with its values, the charts' namespaces, GKE's critical-pods quota and NVIDIA driver
installer, the EKS cluster-autoscaler's IAM) is exactly what `modelplane render` writes for
GitOps (modelplane.render.gitops), compared here on the real program under Pulumi mocks, for an
EKS and a GKE fleet."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from .harness import EKS_AUTONAME, Run, run_program
from .test_cloud_contracts import EKS, GKE, PROFILE


def _normalize(value: object) -> object:
    """JSON with integral floats as ints (the engine hands numbers over as floats)."""
    if isinstance(value, dict):
        return {k: _normalize(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_normalize(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _render(manifests: Path, out: Path) -> Path:
    from modelplane.__main__ import main

    assert main(["render", str(manifests), str(out)]) == 0
    return out


@pytest.fixture(scope="module", params=[("aws", EKS, {}, "eks"), ("gcp", GKE, PROFILE, "gke")], ids=["eks", "gke"])
def both(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[Run, Path, str]:
    stack, manifests, config, cluster = request.param
    directory = tmp_path_factory.mktemp(stack)
    (directory / "fleet.yaml").write_text(manifests)
    run = run_program(stack, config={"manifests": str(directory), **config})
    return run, _render(directory, tmp_path_factory.mktemp(f"{stack}-out")) / cluster, cluster


def _written(cluster_dir: Path) -> dict[tuple[str, str, str], dict]:
    objects = {}
    for path in cluster_dir.glob("*.yaml"):
        obj = yaml.safe_load(path.read_text())
        objects[(obj["kind"], obj["metadata"].get("namespace", ""), obj["metadata"]["name"])] = obj
    return objects


def test_render_writes_every_chart_the_program_installs_with_the_same_values(both) -> None:
    """The Chart resources (kubernetes:helm.sh/v4:Chart: chart, version, repositoryOpts.repo,
    namespace, values) one to one with charts/<NN-name>/release.yaml + values.yaml, in the order
    the program registers them, and each chart's Namespace as a written manifest."""
    run, cluster_dir, cluster = both
    installed = {r.name.removeprefix(f"{cluster}-serving-"): r.inputs
                 for r in run.of_type("kubernetes:helm.sh/v4:Chart") if r.name.startswith(f"{cluster}-serving-")}
    assert installed
    releases = {}
    for release in sorted((cluster_dir / "charts").glob("*/release.yaml")):
        ref = yaml.safe_load(release.read_text())
        values = yaml.safe_load((release.parent / "values.yaml").read_text())
        releases[ref["name"]] = (ref, values)
        assert release.parent.name == f"{ref['order']:02d}-{ref['name']}"
    assert sorted(releases) == sorted(installed)
    written = _written(cluster_dir)
    namespaces = {r.inputs["metadata"]["name"]: r.inputs for r in run.of_type("kubernetes:core/v1:Namespace")
                  if r.name.startswith(f"{cluster}-serving-")}
    for name, chart in installed.items():
        ref, values = releases[name]
        assert (ref["chart"], ref["version"]) == (chart["chart"], chart["version"])
        assert ref["namespace"] == chart["namespace"]
        assert ref["repository"] == (chart.get("repositoryOpts") or {}).get("repo")
        if name == "cluster-autoscaler":
            # The one value the program binds from the cloud (render.serving.bind_eks_cluster_name):
            # render writes the InferenceCluster's name (docs/rendering.md), the program the EKS
            # cluster's physical one, which its Auto Scaling group tags carry.
            physical = cluster + EKS_AUTONAME
            assert values["autoDiscovery"]["clusterName"] == cluster
            assert chart["values"]["autoDiscovery"]["clusterName"] == physical
            values = {**values, "autoDiscovery": {**values["autoDiscovery"], "clusterName": physical}}
        assert _normalize(values) == _normalize(chart.get("values") or {}), name
        assert f"--version {chart['version']}" in ref["install"] and ref["install"].startswith("helm upgrade --install")
        namespace = written[("Namespace", "", chart["namespace"])]
        assert _normalize(namespace["metadata"]) == _normalize(namespaces[chart["namespace"]]["metadata"])


def test_render_writes_the_objects_the_charts_need_first_as_the_program_applies_them(both) -> None:
    """The pre-chart objects (the NVIDIA DRA driver's critical-pods ResourceQuota; on GKE, the
    driver installer DaemonSet: GKE's "Consume critical priority classes" rule and its COS driver
    installer) registered by the ServingStack are the written manifests, byte for byte as JSON."""
    run, cluster_dir, cluster = both
    registered = run.objects(f"{cluster}-serving", cluster)
    assert registered, "no pre-chart object registered"
    written = _written(cluster_dir)
    for obj in registered:
        key = (obj["kind"], obj["metadata"].get("namespace", ""), obj["metadata"]["name"])
        assert _normalize(written[key]) == _normalize(obj), key
    kinds = {obj["kind"] for obj in registered}
    assert kinds == ({"ResourceQuota", "DaemonSet"} if cluster == "gke" else {"ResourceQuota"})


def test_render_says_what_the_eks_cluster_autoscaler_needs_in_iam(both) -> None:
    """kubernetes/autoscaler cluster-autoscaler/cloudprovider/aws/README.md ("Full Cluster
    Autoscaler Features Policy"): the policy the EKS source attaches to the autoscaler's Pod
    Identity role, and the association's namespace and service account, are the cloud file's."""
    run, cluster_dir, cluster = both
    path = cluster_dir / "cloud" / "cluster-autoscaler-iam.json"
    if cluster == "gke":
        assert not path.exists()      # GKE's own autoscaler: nothing to grant
        return
    iam = json.loads(path.read_text())
    policy = json.loads(run.named("eks-autoscaler", "aws:iam/rolePolicy:RolePolicy").inputs["policy"])
    assert iam["policy"] == policy
    [association] = [r.inputs for r in run.of_type("aws:eks/podIdentityAssociation:PodIdentityAssociation")
                     if r.name == "eks-autoscaler"]
    assert iam["podIdentityAssociation"] == {"namespace": association["namespace"],
                                             "serviceAccount": association["serviceAccount"]}
    assert iam["autoscaledPools"] == ["plain"]
