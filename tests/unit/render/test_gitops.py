"""`modelplane render` writes the serving stack a GitOps tool applies: chart references and values
in install order, the charts' namespaces and pre-chart objects, the EKS autoscaler's IAM, and
says what it leaves out (modelplane.render.gitops). Compared with what the Pulumi components
install in tests/pulumi/test_render_serving_stack.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from modelplane.__main__ import main
from modelplane.render.gitops import LEFT_OUT
from modelplane.render.output import write_cluster_dirs
from modelplane.render.serving import CHARTS

from .cloudfleet import CLOUD


def _render(tmp_path: Path, text: str) -> Path:
    src = tmp_path / "fleet"
    src.mkdir()
    (src / "fleet.yaml").write_text(text)
    out = tmp_path / "out"
    assert main(["render", str(src), str(out)]) == 0
    return out


def test_render_writes_each_chart_reference_and_values_in_install_order(tmp_path: Path, capsys) -> None:
    out = _render(tmp_path, CLOUD)
    gke = out / "gke-b"
    releases = sorted((gke / "charts").glob("*/release.yaml"))
    names = [yaml.safe_load(p.read_text())["name"] for p in releases]
    assert names == ["lws", "dra-driver-nvidia-gpu"]
    nvidia = yaml.safe_load(releases[1].read_text())
    source = CHARTS["dra-driver-nvidia-gpu"]
    assert (nvidia["chart"], nvidia["version"], nvidia["namespace"], nvidia["order"]) == (
        source.chart, source.version, "dra-driver-nvidia-gpu", 2)
    assert nvidia["install"] == (f"helm upgrade --install dra-driver-nvidia-gpu {source.chart} --version "
                                 f"{source.version} --namespace dra-driver-nvidia-gpu --values values.yaml")
    values = yaml.safe_load((releases[1].parent / "values.yaml").read_text())
    assert values["nvidiaDriverRoot"] == "/home/kubernetes/bin/nvidia"
    # the namespaces and what the chart's pods need at admission are manifests of the directory
    assert (gke / "namespace-dra-driver-nvidia-gpu.yaml").exists()
    assert yaml.safe_load((gke / "resourcequota-critical-pods.yaml").read_text())["spec"]["hard"] == {"pods": "1k"}
    assert yaml.safe_load((gke / "daemonset-nvidia-driver-installer.yaml").read_text())["kind"] == "DaemonSet"
    # EKS with the EFA device plugin: a chart repository, not OCI
    plugin = [yaml.safe_load(p.read_text()) for p in (out / "eks-a" / "charts").glob("*/release.yaml")
              if "efa" in p.parent.name]
    assert plugin and plugin[0]["repository"] == "https://aws.github.io/eks-charts"
    printed = capsys.readouterr().out
    assert "gke-b: 2 charts to install in order (01-lws, 02-dra-driver-nvidia-gpu)" in printed
    assert LEFT_OUT in printed


def test_render_writes_the_eks_autoscalers_iam_only_where_it_runs(tmp_path: Path) -> None:
    grows = CLOUD.replace("{name: efa, className: p5, nodeCount: 4,", "{name: efa, className: p5, nodeCount: 4, "
                                                                        "maxNodeCount: 6,")
    out = _render(tmp_path, grows)
    iam = json.loads((out / "eks-a" / "cloud" / "cluster-autoscaler-iam.json").read_text())
    actions = {a for s in iam["policy"]["Statement"] for a in s["Action"]}
    assert "autoscaling:SetDesiredCapacity" in actions and iam["autoscaledPools"] == ["efa"]
    assert any("cluster-autoscaler" in p.parent.name for p in (out / "eks-a" / "charts").glob("*/release.yaml"))
    assert not (out / "gke-b" / "cloud").exists()


def test_a_cluster_whose_platform_team_runs_the_stack_gets_none_of_it(tmp_path: Path) -> None:
    provided = CLOUD + """
---
apiVersion: modelplane.ai/v1alpha1
kind: InferenceCluster
metadata: {name: byo}
spec:
  cluster: {source: Existing, existing: {components: Provided}}
  nodePools:
  - {name: h, className: p5, nodeCount: 1, poolLabel: {mode: Present}}
"""
    out = _render(tmp_path, provided)
    assert not (out / "byo" / "charts").exists()
    assert not [p for p in (out / "byo").glob("*.yaml") if "resourcequota" in p.name]


@pytest.mark.parametrize("path", ["../escape.yaml", "/abs.yaml", ""])
def test_files_outside_the_cluster_directory_are_refused(tmp_path: Path, path: str) -> None:
    with pytest.raises(ValueError, match="not a path inside a cluster directory"):
        write_cluster_dirs(tmp_path / "out", {"c": []}, {"c": {path: "x"}})
    assert not (tmp_path / "escape.yaml").exists() and not (tmp_path / "out").exists()


def test_the_render_stack_replaces_only_its_serving_stack_files(tmp_path: Path) -> None:
    """The render stack's copy (write_cluster_files): the charts and cloud subdirectories are
    replaced as a whole (a chart that left the stack leaves no file), the provider's manifests
    beside them are not touched."""
    from modelplane.render.output import write_cluster_files

    cluster = tmp_path / "c"
    (cluster / "1-manifest").mkdir(parents=True)
    (cluster / "1-manifest" / "x.yaml").write_text("kind: X\n")
    write_cluster_files(cluster, {"charts/01-a/release.yaml": "a", "charts/02-b/release.yaml": "b",
                                  "cloud/iam.json": "{}"})
    write_cluster_files(cluster, {"charts/01-a/release.yaml": "a2"})
    assert sorted(str(p.relative_to(cluster)) for p in cluster.rglob("*") if p.is_file()) == [
        "1-manifest/x.yaml", "charts/01-a/release.yaml"]
    assert (cluster / "charts/01-a/release.yaml").read_text() == "a2"
    with pytest.raises(ValueError):
        write_cluster_files(cluster, {"../out.txt": "x"})
    assert not (tmp_path / "out.txt").exists() and (cluster / "charts/01-a/release.yaml").exists()


def test_the_render_stack_removes_its_serving_stack_files_and_only_them(tmp_path: Path) -> None:
    """A render stack's destroy (remove_cluster_files, called by providers/rendered_files.py):
    the charts and cloud subdirectories go; the Kubernetes provider's manifests, a symlinked
    directory's target and the cluster directory while it still holds anything stay."""
    from modelplane.render.output import remove_cluster_files, write_cluster_files

    cluster, elsewhere = tmp_path / "c", tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "keep.txt").write_text("keep")
    write_cluster_files(cluster, {"charts/01-a/release.yaml": "a", "cloud/iam.json": "{}"})
    (cluster / "1-manifest").mkdir()
    (cluster / "1-manifest" / "x.yaml").write_text("kind: X\n")
    remove_cluster_files(cluster)
    assert sorted(str(p.relative_to(cluster)) for p in cluster.rglob("*")) == ["1-manifest", "1-manifest/x.yaml"]
    (cluster / "1-manifest" / "x.yaml").unlink()
    (cluster / "1-manifest").rmdir()
    (cluster / "charts").symlink_to(elsewhere, target_is_directory=True)
    remove_cluster_files(cluster)
    assert (elsewhere / "keep.txt").read_text() == "keep"
    (cluster / "charts").unlink()
    remove_cluster_files(cluster)
    assert not cluster.exists()
    remove_cluster_files(cluster)   # already gone: nothing to do


def test_the_serving_stack_files_resource_writes_rewrites_and_removes(tmp_path: Path) -> None:
    """providers/rendered_files.py: create writes, an update with other files replaces them, a
    new directory replaces the resource, delete removes; a file it cannot write is a message."""
    from providers.rendered_files import ServingStackFilesProvider

    provider, cluster = ServingStackFilesProvider(), tmp_path / "c"
    props = {"dir": str(cluster), "files": {"charts/01-a/release.yaml": "a"}}
    created = provider.create(props)
    assert (cluster / "charts/01-a/release.yaml").read_text() == "a"
    news = {"dir": str(cluster), "files": {"cloud/iam.json": "{}"}}
    diff = provider.diff(created.id, created.outs, news)
    assert diff.changes and not diff.replaces
    updated = provider.update(created.id, created.outs, news)
    assert updated.outs["digest"] != created.outs["digest"]
    assert sorted(str(p.relative_to(cluster)) for p in cluster.rglob("*") if p.is_file()) == ["cloud/iam.json"]
    assert provider.diff(created.id, updated.outs, {**news, "dir": str(tmp_path / "d")}).replaces == ["dir"]
    assert not provider.diff(created.id, updated.outs, news).changes
    provider.delete(created.id, updated.outs)
    assert not cluster.exists()
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    with pytest.raises(RuntimeError, match=r"cannot write the serving stack's files under .*file"):
        provider.create({"dir": str(blocked), "files": {"charts/x.yaml": "x"}})
