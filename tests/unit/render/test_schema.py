"""Every rendered object is valid: core and DRA kinds against the Kubernetes 1.35 OpenAPI
schema (strict: unknown fields fail), LWS and Grove against their documented shapes."""

import pytest

from modelplane.api import load_manifests
from modelplane.plan import gitops_gateway_urls, plan_fleet
from modelplane.render import render_replica
from modelplane.scheduler import place_fleet

from .fleets import full_fleet, place
from .schema import CRD_SHAPES, shape_errors, validate_any
from .test_fleet import _placement


def _manifests(fl, placement):
    return plan_fleet(fl, placement).manifests(gitops_gateway_urls(fl)[0])


def _everything():
    fl = full_fleet()
    objects = [o for objs in _manifests(fl, _placement(fl)).values() for o in objs]
    # the pool labeler and the egress reference of a bring-your-own fleet with a SaaS endpoint
    byo = load_manifests("examples/byo")
    objects += [o for objs in _manifests(byo, place_fleet(byo)).values() for o in objs]
    # the Default-stack gang too, which the fleet placement above puts on Dynamo
    rep = place(fl, "research", "big", "eks-g", pools={"tp16": ("small", "h100")})
    objects += render_replica(fl, fl.deployments[("research", "big")], rep, "eks-g")
    return objects


OBJECTS = _everything()


def test_all_kinds_are_covered():
    kinds = {o["kind"] for o in OBJECTS}
    assert kinds == {"Namespace", "ConfigMap", "PersistentVolumeClaim", "Job", "ResourceClaimTemplate", "Deployment",
                     "LeaderWorkerSet", "PodCliqueSet", "Service", "Queue", "ServiceAccount", "ClusterRole",
                     "ClusterRoleBinding", "Role", "RoleBinding", "ResourceQuota"}


@pytest.mark.parametrize("obj", OBJECTS, ids=lambda o: f"{o['kind']}-{o['metadata']['name']}")
def test_object_is_valid(obj):
    validate_any(obj)


def test_shape_checker_catches_unknown_and_missing_fields():
    pcs = next(o for o in OBJECTS if o["kind"] == "PodCliqueSet")
    broken = {**pcs, "spec": {**pcs["spec"], "replica": 1}}
    assert any("replica: unknown field" in e for e in shape_errors(broken, CRD_SHAPES["PodCliqueSet"]))
    template = {k: v for k, v in pcs["spec"]["template"].items() if k != "cliques"}
    broken = {**pcs, "spec": {**pcs["spec"], "template": template}}
    assert any("cliques: required" in e for e in shape_errors(broken, CRD_SHAPES["PodCliqueSet"]))


def test_embedded_pod_specs_are_checked_as_core_v1():
    lws = next(o for o in OBJECTS if o["kind"] == "LeaderWorkerSet")
    tmpl = lws["spec"]["leaderWorkerTemplate"]
    bad_worker = {**tmpl["workerTemplate"], "spec": {**tmpl["workerTemplate"]["spec"], "nodeSelectr": {}}}
    broken = {**lws, "spec": {**lws["spec"], "leaderWorkerTemplate": {**tmpl, "workerTemplate": bad_worker}}}
    with pytest.raises(AssertionError, match="nodeSelectr"):
        validate_any(broken)


def test_grove_references_are_consistent():
    for pcs in (o for o in OBJECTS if o["kind"] == "PodCliqueSet"):
        cliques = {c["name"]: c for c in pcs["spec"]["template"]["cliques"]}
        for group in pcs["spec"]["template"]["podCliqueScalingGroups"]:
            assert set(group["cliqueNames"]) <= set(cliques)
            assert 1 <= group["minAvailable"] <= group["replicas"]
        for clique in cliques.values():
            assert clique["spec"]["minAvailable"] <= clique["spec"]["replicas"]


def test_claim_references_resolve_within_the_cluster_output():
    fl = full_fleet()
    for objects in _manifests(fl, _placement(fl)).values():
        templates = {(o["metadata"]["namespace"], o["metadata"]["name"])
                     for o in objects if o["kind"] == "ResourceClaimTemplate"}
        pvcs = {(o["metadata"]["namespace"], o["metadata"]["name"])
                for o in objects if o["kind"] == "PersistentVolumeClaim"}
        for obj in objects:
            for spec in _pod_specs(obj):
                ns = obj["metadata"]["namespace"]
                for claim in spec.get("resourceClaims", []):
                    assert (ns, claim["resourceClaimTemplateName"]) in templates
                for vol in spec.get("volumes", []):
                    if "persistentVolumeClaim" in vol:
                        assert (ns, vol["persistentVolumeClaim"]["claimName"]) in pvcs


def _pod_specs(obj):
    spec = obj.get("spec", {})
    if obj["kind"] in ("Deployment", "Job"):
        yield spec["template"]["spec"]
    elif obj["kind"] == "LeaderWorkerSet":
        yield spec["leaderWorkerTemplate"]["leaderTemplate"]["spec"]
        yield spec["leaderWorkerTemplate"]["workerTemplate"]["spec"]
    elif obj["kind"] == "PodCliqueSet":
        for clique in spec["template"]["cliques"]:
            yield clique["spec"]["podSpec"]


def test_cached_validator_agrees_with_the_library():
    import kubernetes_validate

    from .schema import validate_core, validate_with_library

    for obj in OBJECTS:
        if obj["kind"] not in ("LeaderWorkerSet", "PodCliqueSet"):
            validate_with_library(obj)
            break
    bad = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "x"}, "spec": {"bogus": 1}}
    with pytest.raises(kubernetes_validate.ValidationError):
        validate_with_library(bad)
    with pytest.raises(AssertionError, match="bogus"):
        validate_core(bad)


def test_flat_v1beta1_request_shape_would_be_rejected():
    from .schema import validate_core

    rct = next(o for o in OBJECTS if o["kind"] == "ResourceClaimTemplate")
    request = rct["spec"]["spec"]["devices"]["requests"][0]
    flat = {"name": request["name"], **request["exactly"]}
    broken = {**rct, "spec": {"spec": {"devices": {"requests": [flat]}}}}
    with pytest.raises(AssertionError):
        validate_core(broken)
