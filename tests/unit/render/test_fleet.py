"""Everything per cluster: namespaces once, caches where they are needed, stable order."""

import copy

import pytest

from modelplane.naming import child_name
from modelplane.render import RenderError, render_cluster_manifests
from modelplane.render.output import to_yaml
from modelplane.scheduler import DeploymentPlacement, FleetPlacement, place_fleet

from .fleets import full_fleet, place


def _placement(fl):
    chat = [place(fl, "ml-team", "chat", "kind-a", 0), place(fl, "ml-team", "chat", "gke-c", 1)]
    big = [place(fl, "research", "big", "dynamo-b", 0, pools={"tp16": ("small", "h100")})]
    pd = [place(fl, "ml-team", "pd", "kind-a", 0)]
    duo = [place(fl, "default", "duo", "byo-nocache", 0)]
    return FleetPlacement([
        DeploymentPlacement(namespace="default", name="duo", desired=1, replicas=duo),
        DeploymentPlacement(namespace="ml-team", name="chat", desired=2, replicas=chat),
        DeploymentPlacement(namespace="ml-team", name="pd", desired=1, replicas=pd),
        DeploymentPlacement(namespace="research", name="big", desired=1, replicas=big),
    ])


def _names(objects, kind):
    return [o["metadata"]["name"] for o in objects if o["kind"] == kind]


def test_every_cluster_has_an_entry():
    fl = full_fleet()
    out = render_cluster_manifests(fl, _placement(fl))
    assert sorted(out) == sorted(fl.clusters)
    assert out["vultr-f"] == []


def test_namespace_once_per_cluster_and_never_default():
    fl = full_fleet()
    out = render_cluster_manifests(fl, _placement(fl))
    # kind-a holds chat, pd and caches of both namespaces: still one Namespace each
    assert _names(out["kind-a"], "Namespace") == ["ml-team", "research"]
    assert _names(out["dynamo-b"], "Namespace") == ["ml-team", "research"]
    assert _names(out["byo-nocache"], "Namespace") == []  # duo lives in "default"
    assert len(_names(out["byo-nocache"], "Deployment")) == 2


def test_caches_follow_selectors_storage_and_consumers():
    fl = full_fleet()
    out = render_cluster_manifests(fl, _placement(fl))
    qwen = child_name("modelcache", "ml-team", "qwen")
    llama = child_name("modelcache", "ml-team", "llama")
    research = child_name("modelcache", "research", "llama")
    # qwen selects region a; chat's second replica on gke-c still needs its PVC
    assert qwen in _names(out["kind-a"], "PersistentVolumeClaim")
    assert qwen in _names(out["gke-c"], "PersistentVolumeClaim")
    assert qwen not in _names(out["byo-d"], "PersistentVolumeClaim")
    # no selector: every cluster with ReadWriteMany storage, none without
    for cluster in ("kind-a", "dynamo-b", "gke-c", "byo-d", "eks-g"):
        assert llama in _names(out[cluster], "PersistentVolumeClaim")
        assert research in _names(out[cluster], "PersistentVolumeClaim")
    for cluster in ("byo-nocache", "vultr-f"):
        assert not _names(out[cluster], "PersistentVolumeClaim")
    assert child_name("modelcache", "ml-team", "qwen", "hydrate") in _names(out["gke-c"], "Job")


def test_a_consumer_on_a_cluster_without_cache_storage_is_an_error():
    fl = full_fleet()
    placement = FleetPlacement([DeploymentPlacement(
        namespace="ml-team", name="chat", desired=1,
        replicas=[place(fl, "ml-team", "chat", "vultr-f", 0)])])
    with pytest.raises(RenderError, match="vultr-f"):
        render_cluster_manifests(fl, placement)


def test_objects_are_sorted_dependencies_first():
    fl = full_fleet()
    objects = render_cluster_manifests(fl, _placement(fl))["kind-a"]
    kinds = [o["kind"] for o in objects]
    order = ["Namespace", "ConfigMap", "PersistentVolumeClaim", "Job", "ResourceClaimTemplate", "Deployment", "Service"]
    assert kinds == sorted(kinds, key=order.index)
    assert kinds[0] == "Namespace" and kinds[-1] == "Service"


def test_unknown_deployment_or_cluster_in_the_placement_is_an_error():
    fl = full_fleet()
    ghost = FleetPlacement([DeploymentPlacement(namespace="ml-team", name="ghost", desired=1)])
    with pytest.raises(RenderError, match="ghost"):
        render_cluster_manifests(fl, ghost)
    rep = place(fl, "ml-team", "chat", "kind-a")
    lost = FleetPlacement([DeploymentPlacement(
        namespace="ml-team", name="chat", desired=1,
        replicas=[type(rep)(rep.name, 0, "nowhere", rep.engines)])])
    with pytest.raises(RenderError, match="nowhere"):
        render_cluster_manifests(fl, lost)


def test_rendering_is_deterministic_and_input_order_free():
    fl = full_fleet()
    placement = _placement(fl)
    first = render_cluster_manifests(fl, placement)
    again = render_cluster_manifests(full_fleet(), copy.deepcopy(placement))
    shuffled = FleetPlacement(list(reversed(placement.deployments)))
    for d in shuffled.deployments:
        d.replicas = list(reversed(d.replicas))
    third = render_cluster_manifests(fl, shuffled)
    assert first == again == third
    texts = {c: [to_yaml(o) for o in objs] for c, objs in first.items()}
    assert texts == {c: [to_yaml(o) for o in objs] for c, objs in third.items()}
    assert "&id" not in "".join(t for objs in texts.values() for t in objs)


def test_renders_what_the_scheduler_placed():
    fl = full_fleet()
    placement = place_fleet(fl)
    out = render_cluster_manifests(fl, placement)
    placed = sum(len(d.replicas) for d in placement.deployments)
    assert placed > 0
    services = [o for objs in out.values() for o in objs if o["kind"] == "Service"]
    assert len(services) == placed
    for d in placement.deployments:
        for r in d.replicas:
            assert r.name in _names(out[r.cluster], "Service")


def test_renderers_never_import_pulumi():
    import subprocess
    import sys

    code = ("import sys, modelplane.render, modelplane.commands.render; "
            "sys.exit(any(m == 'pulumi' or m.startswith('pulumi.') or m.startswith('pulumi_') for m in sys.modules))")
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    assert subprocess.run([sys.executable, "-c", code], cwd=root).returncode == 0
