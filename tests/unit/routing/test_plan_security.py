"""The secured data path in the cluster plan, `render` and `lint`: what each gateway mounts,
which Secrets are named (never rendered), the API's bounds, and the two gateway policies."""
import hashlib

import pytest
import yaml

from modelplane.api import ManifestError, load_manifest_text
from modelplane.checks import MANDATORY, run_checks
from modelplane.plan import gitops_gateway_urls, plan_fleet
from modelplane.plan.gateway import GatewaySecurityError, callers_secret_data
from modelplane.render import RenderError
from modelplane.scheduler import place_fleet
from tests import manifests as g

NS = "ml-team"


def secured(tls=None, auth=True, limits=None, allowed=None, cluster_source=None):
    gw = g.gateway("east")
    if tls is not None:
        gw["spec"]["tls"] = tls
    if auth:
        gw["spec"]["auth"] = {"method": "APIKey", "apiKey": {"secretSelector": {"matchLabels": {"team": "ml"}}}}
    if limits:
        gw["spec"]["limits"] = {"perCaller": limits}
    svc = g.model_service("chat", g.service_entry({"modelplane.ai/deployment": "chat"}), namespace=NS)
    if allowed:
        svc["spec"]["allowedCallers"] = allowed
    east = g.cluster("east", g.pool("gpu", "gpu1", 1), source=cluster_source)
    west = g.cluster("west", g.pool("gpu", "gpu1", 1), gateway_hostname="gw.west.example")
    chat = g.deployment("chat", 2, g.engine("main", g.standalone(1)), namespace=NS)
    return [g.gpu_class("gpu1", 1), east, west, gw, chat, svc]


def plan_of(docs):
    fl = load_manifest_text(g.to_yaml(docs))
    plan = plan_fleet(fl, place_fleet(fl))
    return fl, plan, plan.manifests(gitops_gateway_urls(fl)[0])


def by(objects, kind, name):
    return next(o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name)


def test_the_control_plane_mounts_its_certificates_and_keys_and_loads_the_plugin():
    _, plan, out = plan_of(secured(tls={"certificateRefs": [{"name": "edge-cert"}, {"name": "other-cert"}]},
                                   limits={"requestsPerMinute": 600, "inFlight": 8}, allowed=["alice"]))
    objs = out["east"]
    deploy = by(objs, "Deployment", "modelplane-gateway")
    pod = deploy["spec"]["template"]["spec"]
    secrets = {v["secret"]["secretName"] for v in pod["volumes"] if "secret" in v}
    assert secrets == {"modelplane-gateway-hop", "edge-cert", "other-cert", "modelplane-gateway-callers"}
    container = pod["containers"][0]
    assert container["workingDir"] == "/modelplane"
    plugins = next(v for v in pod["volumes"] if v["name"] == "plugins")["configMap"]
    assert {i["path"] for i in plugins["items"]} >= {"src/modelplane.local/callerauth/callerauth.go",
                                                    "src/modelplane.local/callerauth/.traefik.yml"}
    sources = by(objs, "ConfigMap", "modelplane-gateway-plugins")["data"]
    assert "package callerauth" in sources["callerauth.go"] and not any(k.endswith("_test.go") for k in sources)
    static = yaml.safe_load(by(objs, "ConfigMap", "modelplane-gateway-static")["data"]["traefik.yaml"])
    plugin_static = static["experimental"]["localPlugins"]["modelplane-callerauth"]
    assert plugin_static["moduleName"] == "modelplane.local/callerauth"
    svc = by(objs, "Service", "modelplane-gateway")
    assert [p["port"] for p in svc["spec"]["ports"]] == [443], "plain HTTP refused: no port 80 at all"
    routes = yaml.safe_load(by(objs, "ConfigMap", "modelplane-gateway-routes")["data"]["routes.yaml"])
    plugin = routes["http"]["middlewares"]["auth-ml-team-chat"]["plugin"]["modelplane-callerauth"]
    assert plugin["allowed"] == ["alice"] and plugin["requestsPerMinute"] == 600 and plugin["inFlight"] == 8
    assert plugin["keysDir"] == "/etc/modelplane/callers"
    assert [c["certFile"] for c in routes["tls"]["certificates"]] == [
        "/etc/modelplane/tls/edge-cert/tls.crt", "/etc/modelplane/tls/other-cert/tls.crt"]
    west = next(s for s in routes["http"]["serversTransports"].values() if s["serverName"] == "gw.west.example")
    assert west["rootCAs"] == ["/etc/modelplane/hop/ca.crt"]
    assert not [o for objects in out.values() for o in objects if o["kind"] == "Secret"], "Secrets are never rendered"
    needs = {s.name: s for s in plan.secrets}
    assert {"edge-cert", "other-cert", "modelplane-gateway-callers", "modelplane-gateway-hop",
            "east-gateway-hop", "west-gateway-hop"} <= set(needs)
    assert "team=ml" in needs["modelplane-gateway-callers"].describe()


def test_every_workload_gateway_serves_mutual_tls_only():
    _, _, out = plan_of(secured(tls={"selfSigned": True}))
    for cluster in ("east", "west"):
        objs = out[cluster]
        gw = by(objs, "Deployment", f"{cluster}-gateway")["spec"]["template"]["spec"]
        assert {v["secret"]["secretName"] for v in gw["volumes"] if "secret" in v} == {f"{cluster}-gateway-hop"}
        routes = yaml.safe_load(by(objs, "ConfigMap", f"{cluster}-gateway-routes")["data"]["routes.yaml"])
        assert routes["tls"]["options"]["default"]["clientAuth"]["clientAuthType"] == "RequireAndVerifyClientCert"
        assert all(r.get("tls") == {} for r in routes["http"]["routers"].values())
        assert by(objs, "Service", f"{cluster}-gateway")["spec"]["ports"][0]["port"] == 443


def test_redirect_mode_exposes_80_only_to_redirect():
    _, _, out = plan_of(secured(tls={"selfSigned": True, "plainHttp": "Redirect"}))
    svc = by(out["east"], "Service", "modelplane-gateway")
    assert [(p["port"], p["targetPort"]) for p in svc["spec"]["ports"]] == [(443, 8000), (80, 8080)]


def test_a_fleet_without_tls_or_auth_keeps_a_plain_edge_but_mutual_tls_between_the_hops():
    _, plan, out = plan_of(secured(auth=False))
    routes = yaml.safe_load(by(out["east"], "ConfigMap", "modelplane-gateway-routes")["data"]["routes.yaml"])
    assert "tls" not in routes and "serversTransports" in routes["http"]
    assert not any(o["metadata"]["name"] == "modelplane-gateway-plugins" for o in out["east"])


def test_allowed_callers_without_auth_is_refused_naming_the_service_and_the_fix():
    with pytest.raises(RenderError, match=r"ModelService ml-team/chat: spec.allowedCallers needs caller API keys"):
        plan_of(secured(auth=False, allowed=["alice"]))


@pytest.mark.parametrize(("gateway_spec", "problem"), [
    ({"tls": {}}, "exactly one of certificateRefs"),
    ({"tls": {"selfSigned": True, "certificateRefs": [{"name": "x"}]}}, "exactly one of certificateRefs"),
    ({"tls": {"certificateRefs": [{"name": "x"}, {"name": "x"}]}}, "more than once"),
    ({"tls": {"certificateRefs": [{"name": f"c{i}"} for i in range(9)]}}, "at most 8"),
    ({"auth": {"apiKey": {"secretSelector": {"matchLabels": {}}}}}, "every Secret"),
    ({"limits": {"perCaller": {"inFlight": 2}}}, "needs auth"),
])
def test_gateway_fields_are_bounded(gateway_spec, problem):
    gw = g.gateway("east")
    gw["spec"].update(gateway_spec)
    with pytest.raises(ManifestError, match=problem):
        load_manifest_text(g.to_yaml([gw]))


def test_allowed_callers_are_identities():
    svc = g.model_service("chat", g.service_entry({"a": "b"}), namespace=NS)
    for bad in (["has space"], ["a", "a"], []):
        svc["spec"]["allowedCallers"] = bad
        with pytest.raises(ManifestError):
            load_manifest_text(g.to_yaml([svc]))


def test_the_callers_secret_holds_hashes_never_keys_and_bad_entries_never_quote_the_key():
    key = "sk-live-0123456789abcdef"
    data = callers_secret_data({"alice": key + "\n"})
    assert data == {"alice": "sha256:" + hashlib.sha256(key.encode()).hexdigest()}
    with pytest.raises(GatewaySecurityError) as err:
        callers_secret_data({"alice": "short-secret"})
    assert "short-secret" not in str(err.value) and "alice" in str(err.value)
    with pytest.raises(GatewaySecurityError, match="not a valid identity"):
        callers_secret_data({"bad name": key})


def test_rendered_files_hold_no_certificate_or_key(tmp_path):
    _, _, out = plan_of(secured(tls={"selfSigned": True}))
    text = yaml.safe_dump(out)
    assert "BEGIN" not in text and "PRIVATE" not in text


def _levels(docs, **kwargs):
    return {(f.policy, f.level) for f in run_checks(load_manifest_text(g.to_yaml(docs)), **kwargs)
            if f.policy.startswith("gateway-")}


def test_auth_without_tls_is_mandatory_and_an_exposed_gateway_without_both_is_advisory():
    eks = {"source": "EKS", "eks": {"region": "us-east-1"}}
    assert _levels(secured(tls=None, auth=True, cluster_source=eks)) == {
        ("gateway-auth-needs-tls", MANDATORY), ("gateway-exposed", "advisory")}
    assert _levels(secured(tls={"certificateRefs": [{"name": "x"}]}, auth=False, cluster_source=eks)) == {
        ("gateway-exposed", "advisory")}
    assert _levels(secured(tls={"certificateRefs": [{"name": "x"}]}, auth=True, cluster_source=eks)) == set()
    # on Kind the gateway is a NodePort on the host, not reachable from anywhere
    assert _levels(secured(tls={"selfSigned": True}, auth=False)) == set()
    assert _levels(secured(tls=None, auth=True)) == {("gateway-auth-needs-tls", MANDATORY)}
    # no cluster named: where it runs is the stack's controlPlane, which lint does not see
    unnamed = secured(tls=None, auth=False, cluster_source=eks)
    del unnamed[3]["spec"]["clusterName"]
    assert _levels(unnamed) == set()


# ---------------------------------------------------------------- issue 30

def saas_endpoint(origin, credential=True):
    spec = {"origin": origin, "model": "m"}
    if credential:
        spec["credentialRef"] = {"name": "provider-key", "key": "apiKey"}
    return {"apiVersion": g.API, "kind": "ModelEndpoint", "metadata": {"name": "saas", "namespace": NS},
            "spec": spec}


def _findings(docs, policy):
    return [f for f in run_checks(load_manifest_text(g.to_yaml(docs))) if f.policy == policy]


def test_30_7_a_provider_key_sent_over_plain_http_is_a_mandatory_finding():
    base = secured(tls={"selfSigned": True})
    (finding,) = _findings([*base, saas_endpoint("http://api.example.com")], "endpoint-key-needs-tls")
    assert finding.level == MANDATORY and finding.field == "spec.origin"
    assert "provider-key" in finding.message and "https://" in finding.message
    assert _findings([*base, saas_endpoint("https://api.example.com")], "endpoint-key-needs-tls") == []
    assert _findings([*base, saas_endpoint("http://api.example.com", credential=False)], "endpoint-key-needs-tls") == []


def test_30_low_plain_http_redirect_with_caller_keys_gets_an_advisory():
    redirect = secured(tls={"selfSigned": True, "plainHttp": "Redirect"})
    (finding,) = _findings(redirect, "gateway-redirect-with-keys")
    assert finding.level == "advisory" and finding.field == "spec.tls.plainHttp" and "Refuse" in finding.message
    assert _findings(secured(tls={"selfSigned": True}), "gateway-redirect-with-keys") == []
    assert _findings(secured(tls={"selfSigned": True, "plainHttp": "Redirect"}, auth=False),
                     "gateway-redirect-with-keys") == []


@pytest.mark.parametrize("name", ["../../etc", "a/b", "..", "Edge_Cert", "x" * 254])
def test_30_low_certificate_refs_are_secret_names_never_a_path(name):
    gw = g.gateway("east")
    gw["spec"]["tls"] = {"certificateRefs": [{"name": name}]}
    with pytest.raises(ManifestError, match=r"certificateRefs\[0\]\.name \(a Secret name\)"):
        load_manifest_text(g.to_yaml([gw]))


def test_30_low_two_callers_sharing_one_key_are_refused_at_render():
    key = "sk-shared-0123456789abcdef"
    with pytest.raises(GatewaySecurityError, match="callers alice, bob have the same API key") as err:
        callers_secret_data({"alice": key, "bob": f" {key}\n", "carol": "sk-carol-0123456789abcdef"})
    assert key not in str(err.value)


def test_30_low_tls_1_2_offers_aead_suites_only():
    """Traefik's TLS option `cipherSuites` (doc.traefik.io/reference/routing-configuration/http/tls/
    tls-options, "Cipher Suites"), Go's crypto/tls names: with it unset, Go's defaults for TLS 1.2
    include the ECDHE CBC-SHA suites. The running edge refuses them:
    tests/integration/test_secure_data_path.py."""
    _, _, out = plan_of(secured(tls={"selfSigned": True}))
    options = [doc["tls"]["options"]["default"] for objects in out.values() for o in objects
               if o["kind"] == "ConfigMap" for key, text in (o.get("data") or {}).items() if key.endswith(".yaml")
               for doc in [yaml.safe_load(text)] if isinstance(doc, dict) and "tls" in doc]
    assert len(options) == 3                       # the edge and both workload gateways (their mTLS side)
    for option in options:
        suites = option["cipherSuites"]
        assert suites and all(("_GCM_" in s or "CHACHA20_POLY1305" in s) and "ECDHE" in s for s in suites), suites
