"""ModelCache: a ReadWriteMany PVC and a Job staging the pinned revision into HF's layout."""

import pytest

from modelplane.naming import child_name
from modelplane.render import RenderError, render_cache

from .fleets import full_fleet, one


def _render(cluster="kind-a", key=("ml-team", "qwen")):
    fl = full_fleet()
    return fl, render_cache(fl, fl.caches[key], fl.clusters[cluster])


def test_pvc_is_rwx_sized_and_named_per_semantics():
    _, objects = _render("gke-c")
    pvc = one(objects, "PersistentVolumeClaim")
    assert pvc["metadata"]["name"] == child_name("modelcache", "ml-team", "qwen")
    assert pvc["metadata"]["namespace"] == "ml-team"
    assert pvc["spec"]["accessModes"] == ["ReadWriteMany"]
    # Filestore's minimum instance is 1 TiB: asking for less on GKE is asking for 1 TiB.
    assert pvc["spec"]["resources"]["requests"]["storage"] == "1024Gi"
    assert pvc["metadata"]["labels"]["modelplane.ai/modelcache"] == "qwen"
    assert pvc["metadata"]["labels"]["modelplane.ai/cluster"] == "gke-c"


def test_kind_uses_read_write_once_because_local_path_refuses_rwx():
    _, objects = _render("kind-a")
    assert one(objects, "PersistentVolumeClaim")["spec"]["accessModes"] == ["ReadWriteOnce"]


@pytest.mark.parametrize("cluster, storage_class", [
    ("kind-a", "standard"),
    ("dynamo-b", "modelplane-rwx-efs"),
    ("gke-c", "modelplane-rwx"),
    ("byo-d", "nfs-rwx"),
])
def test_storage_class_per_source(cluster, storage_class):
    _, objects = _render(cluster)
    assert one(objects, "PersistentVolumeClaim")["spec"]["storageClassName"] == storage_class


@pytest.mark.parametrize("cluster", ["byo-nocache", "vultr-f"])
def test_no_rwx_storage_is_an_error_not_a_pending_pvc(cluster):
    fl = full_fleet()
    with pytest.raises(RenderError, match=cluster):
        render_cache(fl, fl.caches[("ml-team", "qwen")], cluster)


def test_job_stages_the_pinned_revision_into_the_hub_cache_layout():
    fl, objects = _render()
    job = one(objects, "Job")
    assert job["metadata"]["name"] == child_name("modelcache", "ml-team", "qwen", "hydrate")
    pod = job["spec"]["template"]["spec"]
    [container] = pod["containers"]
    assert container["image"] == "vllm/vllm-openai:v0.26.0"
    script = " ".join(container["command"] + container["args"])
    sha = fl.caches[("ml-team", "qwen")].spec.hugging_face.revision
    assert "pip" not in script     # nothing installed at run time: the image carries hf
    assert f"hf download Qwen/Qwen3-0.6B --revision {sha} --cache-dir /mnt/models/.hf/hub" in script
    assert "--local-dir" not in script
    pvc = child_name("modelcache", "ml-team", "qwen")
    assert pod["volumes"] == [{"name": "model-cache", "persistentVolumeClaim": {"claimName": pvc}}]
    assert container["volumeMounts"] == [{"name": "model-cache", "mountPath": "/mnt/models"}]
    assert pod["restartPolicy"] == "OnFailure"


def test_token_comes_only_from_a_secret_reference():
    _, objects = _render()
    container = one(objects, "Job")["spec"]["template"]["spec"]["containers"][0]
    [token] = [e for e in container["env"] if e["name"] == "HF_TOKEN"]
    assert "value" not in token
    assert token["valueFrom"] == {"secretKeyRef": {
        "name": child_name("modelcache", "ml-team", "qwen", "auth"), "key": "HF_TOKEN"}}
    assert not [o for o in objects if o["kind"] == "Secret"]


def test_unpinned_public_cache_stages_main_without_a_token():
    _, objects = _render("gke-c", ("ml-team", "llama"))
    container = one(objects, "Job")["spec"]["template"]["spec"]["containers"][0]
    assert "--revision main" in container["args"][0]
    assert "env" not in container
    assert one(objects, "PersistentVolumeClaim")["spec"]["resources"]["requests"]["storage"] == "1024Gi"
    _, on_eks = _render("dynamo-b", ("ml-team", "llama"))
    assert one(on_eks, "PersistentVolumeClaim")["spec"]["resources"]["requests"]["storage"] == "200Gi"


def test_repo_names_are_shell_quoted():
    from modelplane.render.cache import staging_script

    script = staging_script("org/model; rm -rf /", "main")
    assert "'org/model; rm -rf /'" in script
