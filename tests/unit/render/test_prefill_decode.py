"""PrefillDecode: two phase engines with NIXL plumbing behind vLLM's P/D router."""

from modelplane.render import render_replica

from .fleets import by_kind, env_map, full_fleet, one, place


def _render():
    fl = full_fleet()
    rep = place(fl, "ml-team", "pd", "kind-a")
    return rep, render_replica(fl, fl.deployments[("ml-team", "pd")], rep, "kind-a")


def _by_engine(objects):
    return {d["metadata"]["labels"]["modelplane.ai/engine"]: d for d in by_kind(objects, "Deployment")
            if d["metadata"]["labels"]["modelplane.ai/engine"] != "pd-router"}


def test_each_phase_engine_keeps_its_own_copies():
    _, objects = _render()
    deps = _by_engine(objects)
    assert deps["prefill"]["spec"]["replicas"] == 3
    assert deps["decode"]["spec"]["replicas"] == 1


def test_role_labels_follow_the_phase_not_the_name():
    _, objects = _render()
    deps = _by_engine(objects)
    assert deps["prefill"]["spec"]["template"]["metadata"]["labels"]["llm-d.ai/role"] == "prefill"
    assert deps["decode"]["spec"]["template"]["metadata"]["labels"]["llm-d.ai/role"] == "decode"


def test_nixl_side_channel_env_on_both_engines():
    _, objects = _render()
    for dep in _by_engine(objects).values():
        env = env_map(dep["spec"]["template"]["spec"]["containers"][0])
        assert env["VLLM_NIXL_SIDE_CHANNEL_HOST"] == {
            "name": "VLLM_NIXL_SIDE_CHANNEL_HOST", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}
    prefill = _by_engine(objects)["prefill"]["spec"]["template"]["spec"]["containers"][0]
    assert env_map(prefill)["VLLM_NIXL_SIDE_CHANNEL_PORT"]["value"] == "5557"


def test_user_side_channel_port_wins():
    _, objects = _render()
    decode = _by_engine(objects)["decode"]["spec"]["template"]["spec"]["containers"][0]
    ports = [e for e in decode["env"] if e["name"] == "VLLM_NIXL_SIDE_CHANNEL_PORT"]
    assert ports == [{"name": "VLLM_NIXL_SIDE_CHANNEL_PORT", "value": "5600"}]


def test_service_routes_to_the_pd_router_and_no_inference_pool_is_rendered():
    rep, objects = _render()
    svc = one(objects, "Service")
    assert svc["metadata"]["name"] == rep.name
    assert svc["spec"]["selector"] == {"modelplane.ai/serving": rep.name, "app.kubernetes.io/component": "pd-router"}
    kinds = {o["kind"] for o in objects}
    assert kinds == {"ResourceClaimTemplate", "Deployment", "Service", "ServiceAccount", "Role", "RoleBinding"}


def test_unified_engines_get_no_nixl_env():
    fl = full_fleet()
    rep = place(fl, "ml-team", "chat", "kind-a")
    objects = render_replica(fl, fl.deployments[("ml-team", "chat")], rep, "kind-a")
    engine = one(objects, "Deployment")["spec"]["template"]["spec"]["containers"][0]
    assert not [e for e in engine["env"] if e["name"].startswith("VLLM_NIXL")]
    assert "llm-d.ai/role" not in one(objects, "Deployment")["spec"]["template"]["metadata"]["labels"]
