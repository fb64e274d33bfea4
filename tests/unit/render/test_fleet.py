"""The cluster plan: everything per cluster, namespaces once, caches where they are
needed, the platform's own objects, stable order (modelplane.plan)."""

import copy
import subprocess
import sys
from pathlib import Path

import pytest

from modelplane.naming import child_name
from modelplane.plan import PlanError, gitops_gateway_urls, plan_cluster, plan_fleet
from modelplane.plan.gateway import GENERATED_HOP
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


def _manifests(fl, placement):
    return {name: plan.objects() for name, plan in plan_fleet(fl, placement).clusters.items()}


def _names(objects, kind):
    return [o["metadata"]["name"] for o in objects if o["kind"] == kind]


def _workload_namespaces(objects):
    return [n for n in _names(objects, "Namespace") if n != "modelplane-system"]


def test_every_cluster_has_a_plan():
    fl = full_fleet()
    out = _manifests(fl, _placement(fl))
    assert sorted(out) == sorted(fl.clusters)
    # nothing placed there, no cache storage: only the platform's own objects
    assert {o["metadata"].get("namespace", "") for o in out["vultr-f"]} <= {"", "modelplane-system"}


def test_namespace_once_per_cluster_never_builtin_and_static():
    fl = full_fleet()
    out = _manifests(fl, _placement(fl))
    # kind-a holds chat, pd and caches of both namespaces: still one Namespace each
    assert _workload_namespaces(out["kind-a"]) == ["ml-team", "research"]
    assert _workload_namespaces(out["dynamo-b"]) == ["ml-team", "research"]
    # duo lives in "default", never created; pd (ml-team, no cache) may run there too
    assert _workload_namespaces(out["byo-nocache"]) == ["ml-team"]
    assert len([n for n in _names(out["byo-nocache"], "Deployment") if "gateway" not in n]) == 2
    # a namespace stays while its deployments may run there, replicas or not: moving a
    # replica away must not delete (and terminate) the namespace it may come back to
    empty = _manifests(fl, FleetPlacement([]))
    assert _workload_namespaces(empty["kind-a"]) == ["ml-team", "research"]


def test_caches_follow_selectors_storage_and_consumers():
    fl = full_fleet()
    out = _manifests(fl, _placement(fl))
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
    plan = plan_fleet(fl, _placement(fl))
    assert plan.cache_clusters("ml-team", "qwen") == ["gke-c", "kind-a"]


def test_the_token_secret_a_cache_job_reads_is_named_never_rendered():
    fl = full_fleet()
    plan = plan_fleet(fl, _placement(fl))
    needs = {(s.namespace, s.name, s.key, s.config) for s in plan.secrets if s.config != GENERATED_HOP}
    assert needs == {("ml-team", child_name("modelcache", "ml-team", "qwen", "auth"), "HF_TOKEN", "hfToken")}
    # and the hop certificates' Secrets, one per gateway (modelplane.plan.gateway)
    assert {s.name for s in plan.secrets if s.config == GENERATED_HOP} == \
        {f"{c}-gateway-hop" for c in fl.clusters} | {"modelplane-gateway-hop"}
    for objects in plan.manifests(gitops_gateway_urls(fl)[0]).values():
        assert not _names(objects, "Secret")


def test_platform_objects_per_cluster():
    fl = full_fleet()
    out = _manifests(fl, _placement(fl))
    # Dynamo: the KAI queue and a ModelExpress server per namespace, built-in ones included
    assert _names(out["dynamo-b"], "Queue") == ["modelplane"]
    mx = [o for o in out["dynamo-b"] if o["metadata"]["name"] == "modelexpress-server"]
    assert sorted((o["metadata"]["namespace"], o["kind"]) for o in mx) == [
        (ns, kind) for ns in ("default", "ml-team", "research") for kind in ("Deployment", "Service")]
    assert not _names(out["kind-a"], "Queue")
    # Kind: the mock engine's source in every namespace used there
    mock = [o for o in out["kind-a"] if o["metadata"]["name"] == "modelplane-mock-engine"]
    assert sorted(o["metadata"]["namespace"] for o in mock) == ["default", "ml-team", "research"]
    # every cluster: modelplane-system and its workload gateway
    for name, objects in out.items():
        assert "modelplane-system" in _names(objects, "Namespace")
        assert f"{name}-gateway" in _names(objects, "Deployment")
        assert f"{name}-gateway-routes" in _names(objects, "ConfigMap")


def test_a_consumer_on_a_cluster_without_cache_storage_is_an_error_naming_the_manifest():
    fl = full_fleet()
    placement = FleetPlacement([DeploymentPlacement(
        namespace="ml-team", name="chat", desired=1,
        replicas=[place(fl, "ml-team", "chat", "vultr-f", 0)])])
    with pytest.raises(PlanError, match=r"^render-test#\d+: replica .* vultr-f, which cannot stage ModelCache qwen"):
        plan_fleet(fl, placement)


def test_objects_are_sorted_dependencies_first():
    fl = full_fleet()
    objects = _manifests(fl, _placement(fl))["kind-a"]
    kinds = [o["kind"] for o in objects]
    order = ["Namespace", "ConfigMap", "PersistentVolumeClaim", "Role", "RoleBinding", "ServiceAccount", "Job",
             "ResourceClaimTemplate", "Deployment", "Service"]
    assert kinds == sorted(kinds, key=order.index)
    assert kinds[0] == "Namespace" and kinds[-1] == "Service"


def test_unknown_deployment_or_cluster_in_the_placement_is_an_error():
    fl = full_fleet()
    ghost = FleetPlacement([DeploymentPlacement(namespace="ml-team", name="ghost", desired=1)])
    with pytest.raises(PlanError, match="ghost"):
        plan_fleet(fl, ghost)
    rep = place(fl, "ml-team", "chat", "kind-a")
    lost = FleetPlacement([DeploymentPlacement(
        namespace="ml-team", name="chat", desired=1,
        replicas=[type(rep)(rep.name, 0, "nowhere", rep.engines)])])
    with pytest.raises(PlanError, match="nowhere"):
        plan_fleet(fl, lost)
    with pytest.raises(PlanError, match="nowhere"):
        plan_cluster(fl, FleetPlacement([]), "nowhere")


def test_planning_is_deterministic_and_input_order_free():
    fl = full_fleet()
    placement = _placement(fl)
    first = _manifests(fl, placement)
    again = _manifests(full_fleet(), copy.deepcopy(placement))
    shuffled = FleetPlacement(list(reversed(placement.deployments)))
    for d in shuffled.deployments:
        d.replicas = list(reversed(d.replicas))
    third = _manifests(fl, shuffled)
    assert first == again == third
    texts = {c: [to_yaml(o) for o in objs] for c, objs in first.items()}
    assert texts == {c: [to_yaml(o) for o in objs] for c, objs in third.items()}
    assert "&id" not in "".join(t for objs in texts.values() for t in objs)


def test_plan_cluster_is_the_fleet_plans_share():
    fl = full_fleet()
    placement = _placement(fl)
    fleet_plan = plan_fleet(fl, placement)
    for name in fl.clusters:
        assert plan_cluster(fl, placement, name) == fleet_plan.clusters[name]


def test_plans_what_the_scheduler_placed():
    fl = full_fleet()
    placement = place_fleet(fl)
    plan = plan_fleet(fl, placement)
    placed = sum(len(d.replicas) for d in placement.deployments)
    assert placed > 0
    for d in placement.deployments:
        for r in d.replicas:
            assert r.name in _names(plan.clusters[r.cluster].objects(), "Service")
            assert [p.replica for p in plan.replicas_of(d.namespace, d.name) if p.replica.name == r.name] == [r]


def test_the_core_never_imports_pulumi():
    code = ("import sys, modelplane.render, modelplane.plan, modelplane.commands.render; "
            "sys.exit(any(m == 'pulumi' or m.startswith('pulumi.') or m.startswith('pulumi_') for m in sys.modules))")
    root = Path(__file__).resolve().parents[3]
    assert subprocess.run([sys.executable, "-c", code], cwd=root).returncode == 0


def test_gateway_configuration_text_has_no_yaml_anchors():
    """The data-path builders share dicts between services; the configuration files must
    not spell that as anchors, or `render` and the Pulumi program write different bytes."""
    from modelplane.api import load_manifests

    fl = load_manifests("examples/kind")
    plan = plan_fleet(fl, place_fleet(fl))
    texts = [text for objects in plan.manifests(gitops_gateway_urls(fl)[0]).values()
             for o in objects if o["kind"] == "ConfigMap" for text in o["data"].values()]
    routes = [t for t in texts if "weighted" in t]
    assert routes and not [t for t in routes if "&id" in t or "*id" in t]
