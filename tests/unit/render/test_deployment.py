"""Standalone engines on the Default stack: a Deployment per engine, one Service per replica."""

from modelplane.naming import child_name
from modelplane.render import render_replica

from .fleets import TWO_STANDALONE, by_kind, env_map, env_names, fleet, full_fleet, one, place


def _render(fl=None, cluster="kind-a", index=0):
    fl = fl or full_fleet()
    rep = place(fl, "ml-team", "chat", cluster, index)
    return rep, render_replica(fl, fl.deployments[("ml-team", "chat")], rep, fl.clusters[cluster])


def _pod(objects):
    return one(objects, "Deployment")["spec"]["template"]


def test_standalone_is_a_deployment_with_copies_as_replicas():
    rep, objects = _render()
    dep = one(objects, "Deployment")
    assert dep["apiVersion"] == "apps/v1"
    assert dep["metadata"]["name"] == child_name(rep.name, "vllm")
    assert dep["metadata"]["namespace"] == "ml-team"
    assert dep["spec"]["replicas"] == 2
    assert not by_kind(objects, "LeaderWorkerSet") and not by_kind(objects, "PodCliqueSet")


def test_selector_is_the_workload_and_rollout_never_surges():
    rep, objects = _render()
    dep = one(objects, "Deployment")
    workload = dep["metadata"]["name"]
    assert dep["spec"]["selector"] == {"matchLabels": {"modelplane.ai/workload": workload}}
    assert dep["spec"]["template"]["metadata"]["labels"]["modelplane.ai/workload"] == workload
    assert dep["spec"]["strategy"]["rollingUpdate"] == {"maxSurge": 0, "maxUnavailable": 1}


def test_labels_identify_the_replica_on_every_object():
    rep, objects = _render(cluster="gke-c", index=1)
    for obj in objects:
        labels = obj["metadata"]["labels"]
        assert labels["modelplane.ai/deployment"] == "chat"
        assert labels["modelplane.ai/cluster"] == "gke-c"
        assert labels["modelplane.ai/replica-index"] == "1"
    pod_labels = _pod(objects)["metadata"]["labels"]
    assert pod_labels["modelplane.ai/serving"] == rep.name
    assert pod_labels["modelplane.ai/replica-index"] == "1"
    assert pod_labels["example.org/team"] == "search"
    assert _pod(objects)["metadata"]["annotations"] == {"example.org/owner": "alice"}


def test_pod_is_pinned_to_its_pool_and_tolerates_gpu_taint():
    _, objects = _render()
    spec = _pod(objects)["spec"]
    assert spec["nodeSelector"] == {"modelplane.ai/pool": "gpu"}
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in spec["tolerations"]
    assert spec["imagePullSecrets"] == [{"name": "regcred"}]
    assert "schedulerName" not in spec


def test_engine_port_probe_and_shm():
    _, objects = _render()
    spec = _pod(objects)["spec"]
    engine = spec["containers"][0]
    assert engine["name"] == "engine"
    assert engine["ports"] == [{"name": "http", "containerPort": 8000, "protocol": "TCP"}]
    assert engine["readinessProbe"] == {
        "httpGet": {"path": "/health", "port": 8000},
        "initialDelaySeconds": 30, "periodSeconds": 10, "timeoutSeconds": 5,
    }
    assert {"name": "dshm", "emptyDir": {"medium": "Memory"}} in spec["volumes"]
    assert {"name": "dshm", "mountPath": "/dev/shm"} in engine["volumeMounts"]


def test_injected_env_comes_first_and_reserved_names_win():
    _, objects = _render()
    engine = _pod(objects)["spec"]["containers"][0]
    names = env_names(engine)
    assert names[0] == "MODELPLANE_SERVED_MODEL_NAME"
    assert env_map(engine)["MODELPLANE_SERVED_MODEL_NAME"]["value"] == "ml-team/chat"
    assert names.count("MODELPLANE_SERVED_MODEL_NAME") == 1  # the user's spoofed entry is dropped
    # user values may refer to injected ones, so the user's entries come last
    assert names.index("VLLM_LOGGING_LEVEL") > names.index("MODELPLANE_MODEL_REVISION")
    # a non-reserved name the user sets is the user's: the injected one steps aside
    assert names.count("HF_HUB_OFFLINE") == 1 and env_map(engine)["HF_HUB_OFFLINE"]["value"] == "0"
    assert "MODELPLANE_RANK" not in names and "MODELPLANE_LEADER_ADDRESS" not in names


def test_cache_mount_env_and_revision_argument():
    fl = full_fleet()
    _, objects = _render(fl)
    spec = _pod(objects)["spec"]
    engine = spec["containers"][0]
    pvc = child_name("modelcache", "ml-team", "qwen")
    assert {"name": "model-cache", "persistentVolumeClaim": {"claimName": pvc}} in spec["volumes"]
    assert {"name": "model-cache", "mountPath": "/mnt/models"} in engine["volumeMounts"]
    env = env_map(engine)
    assert env["HF_HUB_CACHE"]["value"] == "/mnt/models/.hf/hub"
    sha = fl.caches[("ml-team", "qwen")].spec.hugging_face.revision
    assert env["MODELPLANE_MODEL_REVISION"]["value"] == sha
    assert engine["args"] == ["Qwen/Qwen3-0.6B", "--served-model-name", "$(MODELPLANE_SERVED_MODEL_NAME)",
                              "--revision", sha]
    assert "command" not in engine


def test_no_cache_means_no_mount_and_no_revision():
    fl = fleet(TWO_STANDALONE)
    rep = place(fl, "default", "duo", "kind-a")
    objects = render_replica(fl, fl.deployments[("default", "duo")], rep, "kind-a")
    for dep in by_kind(objects, "Deployment"):
        engine = dep["spec"]["template"]["spec"]["containers"][0]
        # kind-a is a Kind cluster: the mock engine's ConfigMap volume rides along
        assert [v["name"] for v in dep["spec"]["template"]["spec"]["volumes"]] == ["dshm", "mock-engine"]
        assert "HF_HUB_CACHE" not in env_names(engine) and "args" not in engine
        assert engine["command"] == ["serve"]


def test_claim_template_and_pod_claims():
    rep, objects = _render()
    rct = one(objects, "ResourceClaimTemplate")
    name = child_name(rep.name, "vllm", "standalone", "devices")
    assert rct["apiVersion"] == "resource.k8s.io/v1"
    assert rct["metadata"]["name"] == name
    assert rct["spec"]["spec"]["devices"]["requests"] == [{
        "name": "gpu",
        "exactly": {
            "deviceClassName": "gpu.example.com",
            "count": 1,
            "selectors": [{"cel": {"expression":
                                   'device.capacity["gpu.example.com"].memory.compareTo(quantity("20Gi")) >= 0'}}],
        },
    }]
    spec = _pod(objects)["spec"]
    assert spec["resourceClaims"] == [{"name": "devices", "resourceClaimTemplateName": name}]
    assert spec["containers"][0]["resources"] == {"claims": [{"name": "devices"}]}


def test_serving_service_is_named_after_the_replica():
    rep, objects = _render()
    svc = one(objects, "Service")
    assert svc["metadata"]["name"] == rep.name
    assert svc["spec"]["type"] == "ClusterIP"
    assert svc["spec"]["selector"] == {"modelplane.ai/serving": rep.name}
    assert svc["spec"]["ports"][0]["port"] == 8000 and svc["spec"]["ports"][0]["targetPort"] == 8000
    # apply order: claim templates, then workloads, then the Service
    assert [o["kind"] for o in objects] == ["ResourceClaimTemplate", "Deployment", "Service"]


def test_two_standalone_engines_do_not_share_a_selector():
    fl = fleet(TWO_STANDALONE)
    rep = place(fl, "default", "duo", "kind-a")
    objects = render_replica(fl, fl.deployments[("default", "duo")], rep, "kind-a")
    deps = by_kind(objects, "Deployment")
    assert len(deps) == 2 and len(by_kind(objects, "ResourceClaimTemplate")) == 2
    selectors = [d["spec"]["selector"]["matchLabels"]["modelplane.ai/workload"] for d in deps]
    assert len(set(selectors)) == 2
    serving = {d["spec"]["template"]["metadata"]["labels"]["modelplane.ai/serving"] for d in deps}
    assert serving == {rep.name}
    assert one(objects, "Service")["spec"]["selector"] == {"modelplane.ai/serving": rep.name}
