"""The Dynamo stack: Grove PodCliqueSets on the KAI scheduler, ModelExpress wiring."""

from modelplane.naming import child_name
from modelplane.render import render_replica
from modelplane.render.names import PCS_NAME_BUDGET

from .fleets import TWO_STANDALONE, by_kind, env_map, env_names, fleet, full_fleet, one, place

POOLS = {"tp16": ("small", "h100")}


def _gang():
    fl = full_fleet()
    rep = place(fl, "research", "big", "dynamo-b", pools=POOLS)
    return rep, render_replica(fl, fl.deployments[("research", "big")], rep, fl.clusters["dynamo-b"])


def _cliques(pcs):
    return {c["name"]: c for c in pcs["spec"]["template"]["cliques"]}


def test_gang_is_a_podcliqueset_with_a_scaling_group_of_copies():
    rep, objects = _gang()
    pcs = one(objects, "PodCliqueSet")
    assert pcs["apiVersion"] == "grove.io/v1alpha1"
    assert not by_kind(objects, "LeaderWorkerSet") and not by_kind(objects, "Deployment")
    assert pcs["spec"]["replicas"] == 1
    cliques = _cliques(pcs)
    assert cliques["leader"]["spec"]["replicas"] == 1
    assert cliques["worker"]["spec"]["replicas"] == 3
    assert cliques["worker"]["spec"]["minAvailable"] == 3
    [group] = pcs["spec"]["template"]["podCliqueScalingGroups"]
    assert group["cliqueNames"] == ["leader", "worker"]
    assert group["replicas"] == 2  # copies


def test_kai_scheduler_and_queue():
    _, objects = _gang()
    pcs = one(objects, "PodCliqueSet")
    assert pcs["metadata"]["labels"]["kai.scheduler/queue"]
    for clique in _cliques(pcs).values():
        assert clique["spec"]["podSpec"]["schedulerName"] == "kai-scheduler"


def test_name_leaves_room_for_grove_hostnames():
    rep, objects = _gang()
    name = one(objects, "PodCliqueSet")["metadata"]["name"]
    assert len(name) <= PCS_NAME_BUDGET and name.startswith("big-")
    longest_hostname = f"{name}-99-gang-99-worker-99"
    assert len(longest_hostname) <= 63


def test_serving_label_on_the_leader_clique_only():
    rep, objects = _gang()
    cliques = _cliques(one(objects, "PodCliqueSet"))
    assert cliques["leader"]["labels"]["modelplane.ai/serving"] == rep.name
    assert "modelplane.ai/serving" not in cliques["worker"]["labels"]
    assert "readinessProbe" in cliques["leader"]["spec"]["podSpec"]["containers"][0]
    assert "readinessProbe" not in cliques["worker"]["spec"]["podSpec"]["containers"][0]
    assert one(objects, "Service")["spec"]["selector"] == {"modelplane.ai/serving": rep.name}


def test_grove_leader_address_is_built_from_entries_defined_before_it_and_no_modelplane_rank():
    """ai-dynamo/grove v0.1.0-alpha.11: Grove appends GROVE_* after the container's env
    (component/utils/pod.go AddEnvVarsToContainers), so the address reads Grove's pod labels
    through the downward API instead (podcliquescalinggroup/components/podclique/podclique.go
    reads the same labels for GROVE_PCSG_NAME/INDEX) and spells the leader's hostname and
    headless Service as namegen.go does."""
    _, objects = _gang()
    pcs = one(objects, "PodCliqueSet")
    name, namespace = pcs["metadata"]["name"], pcs["metadata"]["namespace"]
    for clique in _cliques(pcs).values():
        engine = clique["spec"]["podSpec"]["containers"][0]
        env = env_map(engine)
        names = env_names(engine)
        address = env["MODELPLANE_LEADER_ADDRESS"]["value"]
        assert address == (f"$(MODELPLANE_GANG_NAME)-$(MODELPLANE_GANG_INDEX)-leader-0."
                           f"{name}-$(MODELPLANE_GANG_SET_INDEX).{namespace}.svc.cluster.local")
        for var, key in (("MODELPLANE_GANG_NAME", "grove.io/podcliquescalinggroup"),
                         ("MODELPLANE_GANG_INDEX", "grove.io/podcliquescalinggroup-replica-index"),
                         ("MODELPLANE_GANG_SET_INDEX", "grove.io/podcliqueset-replica-index")):
            assert env[var]["valueFrom"]["fieldRef"]["fieldPath"] == f"metadata.labels['{key}']"
            assert names.index(var) < names.index("MODELPLANE_LEADER_ADDRESS")
        assert "MODELPLANE_RANK" not in env


def test_modelexpress_env_and_capability_with_a_cache():
    _, objects = _gang()
    pvc = child_name("modelcache", "research", "llama")
    for clique in _cliques(one(objects, "PodCliqueSet")).values():
        engine = clique["spec"]["podSpec"]["containers"][0]
        env = env_map(engine)
        assert env["MX_SERVER_ADDRESS"]["value"] == "modelexpress-server:8001"
        assert env["MX_MODEL_REVISION"]["value"] == pvc
        assert "IPC_LOCK" in engine["securityContext"]["capabilities"]["add"]
        # ModelExpress falls back to the PVC, so the cache is still mounted
        assert {"name": "model-cache", "mountPath": "/mnt/models"} in engine["volumeMounts"]


def test_user_load_format_is_respected():
    _, objects = _gang()
    leader = _cliques(one(objects, "PodCliqueSet"))["leader"]["spec"]["podSpec"]["containers"][0]
    assert [a for a in leader["args"] if a.startswith("--load-format")] == ["--load-format=safetensors"]
    assert "modelexpress" not in leader["args"]


def test_standalone_on_dynamo_is_a_deployment_wired_to_modelexpress():
    fl = full_fleet()
    rep = place(fl, "ml-team", "chat", "dynamo-b", pools={"vllm": ("small",)})
    objects = render_replica(fl, fl.deployments[("ml-team", "chat")], rep, "dynamo-b")
    dep = one(objects, "Deployment")
    assert not by_kind(objects, "PodCliqueSet")
    engine = dep["spec"]["template"]["spec"]["containers"][0]
    sha = fl.caches[("ml-team", "qwen")].spec.hugging_face.revision
    # The loader is opt-in (modelplane.ai/modelexpress: "true"): stock images may lack it.
    assert engine["args"][-2:] == ["--revision", sha] and "--load-format" not in engine["args"]
    assert "MX_SERVER_ADDRESS" in env_names(engine) and env_map(engine)["MODELPLANE_LOAD_FORMAT"]["value"] == "auto"
    assert "schedulerName" not in dep["spec"]["template"]["spec"]


def test_modelexpress_loader_is_appended_only_when_the_deployment_opts_in():
    fl = full_fleet()
    fl.deployments[("ml-team", "chat")].metadata.annotations = {"modelplane.ai/modelexpress": "true"}
    rep = place(fl, "ml-team", "chat", "dynamo-b", pools={"vllm": ("small",)})
    engine = one(render_replica(fl, fl.deployments[("ml-team", "chat")], rep, "dynamo-b"),
                 "Deployment")["spec"]["template"]["spec"]["containers"][0]
    assert engine["args"][-2:] == ["--load-format", "modelexpress"]
    assert env_map(engine)["MODELPLANE_LOAD_FORMAT"]["value"] == "modelexpress"


def test_dynamo_without_a_cache_has_no_modelexpress():
    fl = fleet(TWO_STANDALONE)
    rep = place(fl, "default", "duo", "dynamo-b", pools={"a": ("small",), "b": ("small",)})
    objects = render_replica(fl, fl.deployments[("default", "duo")], rep, "dynamo-b")
    for dep in by_kind(objects, "Deployment"):
        engine = dep["spec"]["template"]["spec"]["containers"][0]
        assert not [n for n in env_names(engine) if n.startswith("MX_")]
        assert "securityContext" not in engine
