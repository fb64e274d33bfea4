"""Leader + Worker on the Default stack: one LeaderWorkerSet per engine."""

from modelplane.naming import child_name
from modelplane.render import render_replica

from .fleets import by_kind, env_map, env_names, full_fleet, one, place

POOLS = {"tp16": ("small", "h100")}  # claimless leader on a small pool, workers on H100s


def _render():
    fl = full_fleet()
    rep = place(fl, "research", "big", "eks-g", pools=POOLS)
    return rep, render_replica(fl, fl.deployments[("research", "big")], rep, fl.clusters["eks-g"])


def test_gang_is_a_leaderworkerset_sized_one_plus_workers():
    rep, objects = _render()
    lws = one(objects, "LeaderWorkerSet")
    assert lws["apiVersion"] == "leaderworkerset.x-k8s.io/v1"
    assert lws["metadata"]["name"] == child_name(rep.name, "tp16")
    assert lws["metadata"]["name"] != rep.name  # LWS owns a headless Service of its own name
    assert lws["spec"]["replicas"] == 2
    assert lws["spec"]["leaderWorkerTemplate"]["size"] == 4
    assert not by_kind(objects, "Deployment") and not by_kind(objects, "PodCliqueSet")


def test_only_the_leader_serves():
    rep, objects = _render()
    tmpl = one(objects, "LeaderWorkerSet")["spec"]["leaderWorkerTemplate"]
    leader, worker = tmpl["leaderTemplate"], tmpl["workerTemplate"]
    assert leader["metadata"]["labels"]["modelplane.ai/serving"] == rep.name
    assert leader["metadata"]["labels"]["modelplane.ai/lws-role"] == "leader"
    assert "modelplane.ai/serving" not in worker["metadata"]["labels"]
    assert "readinessProbe" in leader["spec"]["containers"][0]
    worker_engine = worker["spec"]["containers"][0]
    assert "readinessProbe" not in worker_engine and "ports" not in worker_engine


def test_each_member_has_its_own_pool_and_claim():
    rep, objects = _render()
    tmpl = one(objects, "LeaderWorkerSet")["spec"]["leaderWorkerTemplate"]
    leader, worker = tmpl["leaderTemplate"]["spec"], tmpl["workerTemplate"]["spec"]
    assert leader["nodeSelector"] == {"modelplane.ai/pool": "small"}
    assert worker["nodeSelector"] == {"modelplane.ai/pool": "h100"}
    assert "resourceClaims" not in leader and "resources" not in leader["containers"][0]
    rct = one(objects, "ResourceClaimTemplate")  # the claimless leader gets none
    assert rct["metadata"]["name"] == child_name(rep.name, "tp16", "worker", "devices")
    assert worker["resourceClaims"] == [{"name": "devices", "resourceClaimTemplateName": rct["metadata"]["name"]}]


def test_synthetic_devices_stay_out_of_the_claim():
    _, objects = _render()
    requests = one(objects, "ResourceClaimTemplate")["spec"]["spec"]["devices"]["requests"]
    assert [r["name"] for r in requests] == ["gpu"]
    assert requests[0]["exactly"]["deviceClassName"] == "gpu.nvidia.com"
    assert requests[0]["exactly"]["count"] == 8


def test_leader_address_and_rank_come_from_lws():
    _, objects = _render()
    tmpl = one(objects, "LeaderWorkerSet")["spec"]["leaderWorkerTemplate"]
    for pod in (tmpl["leaderTemplate"], tmpl["workerTemplate"]):
        engine = pod["spec"]["containers"][0]
        env = env_map(engine)
        assert env["MODELPLANE_LEADER_ADDRESS"]["value"] == "$(LWS_LEADER_ADDRESS)"
        assert env["MODELPLANE_RANK"]["value"] == "$(LWS_WORKER_INDEX)"
        assert env_names(engine)[:3] == ["MODELPLANE_SERVED_MODEL_NAME", "MODELPLANE_LEADER_ADDRESS",
                                         "MODELPLANE_RANK"]
        assert env["MODELPLANE_SERVED_MODEL_NAME"]["value"] == "research/big"


def test_user_revision_is_kept_and_custom_commands_get_it_as_env():
    _, objects = _render()
    tmpl = one(objects, "LeaderWorkerSet")["spec"]["leaderWorkerTemplate"]
    leader = tmpl["leaderTemplate"]["spec"]["containers"][0]
    assert leader["args"] == ["meta-llama/Llama-3.1-70B", "--revision", "v2", "--load-format=safetensors"]
    worker = tmpl["workerTemplate"]["spec"]["containers"][0]
    assert worker["command"] == ["/bin/sh", "-c"]
    assert len(worker["args"]) == 1 and "--headless" in worker["args"][0]
    assert env_map(worker)["MODELPLANE_MODEL_REVISION"]["value"] == "v2"
    # the Default stack has no ModelExpress
    assert "MX_SERVER_ADDRESS" not in env_names(worker)
    assert "securityContext" not in worker


def test_both_members_mount_the_cache():
    _, objects = _render()
    tmpl = one(objects, "LeaderWorkerSet")["spec"]["leaderWorkerTemplate"]
    pvc = child_name("modelcache", "research", "llama")
    for pod in (tmpl["leaderTemplate"], tmpl["workerTemplate"]):
        assert {"name": "model-cache", "persistentVolumeClaim": {"claimName": pvc}} in pod["spec"]["volumes"]
        assert {"name": "model-cache", "mountPath": "/mnt/models"} in pod["spec"]["containers"][0]["volumeMounts"]
