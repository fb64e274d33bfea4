"""ModelCache -> a shared PVC and the Job that stages the weights (semantics §5).

One layout serves both ways engines are started:

* `hf download --cache-dir /mnt/models/.hf/hub` stages into Hugging Face's cache layout
  (`models--org--repo/snapshots/<sha>/`), where engines that name the model by repo id find
  it through `HF_HUB_CACHE` and the explicit `--revision` (k8s-api-shapes.md §8);
* the PVC's root is then made a view of that snapshot: one relative symlink per top-level
  file, so `vllm serve /mnt/models` (the reference's `--local-dir` style) reads the same
  files. Nothing is stored twice; a new revision is staged beside the old one and the view
  is switched to it.

Only after both does the Job write a completion marker per (repo, revision); engine pods
wait for it in an init container instead of crash-looping on `HF_HUB_OFFLINE=1` while the
weights are still downloading, and a re-run Job exits at once when it exists.
"""

from __future__ import annotations

import hashlib
import re
import shlex

from modelplane.api import Fleet, InferenceCluster, ModelCache
from modelplane.api.model_cache import HuggingFace
from modelplane.storage import cache_access_mode, cache_request_gib, cache_storage_class, cache_storage_problem
from modelplane.vocabulary import LABEL_CLUSTER, LABEL_MANAGED_BY, LABEL_MODELCACHE, MANAGED_BY, Manifest

from .context import resolve_cluster
from .meta import CACHE_MOUNT, DEFAULT_REVISION, RenderError, metadata
from .names import cache_job_name, cache_pvc_name, cache_secret_name
from .readiness import staging_timeout_s, with_timeout

# What the staging Job runs in, and engine pods wait in, unless the ModelCache names
# `spec.stagingImage`: an image that carries the `hf` CLI (huggingface_hub >= 0.34; `huggingface-cli`
# is a failing stub from 1.11 on), so nothing is installed at run time (a VPC without egress
# could not). vLLM's image installs vllm, which requires transformers >= 4.56
# (vllm-project/vllm requirements/common.txt), which requires huggingface-hub >= 0.34.0, < 1.0
# (transformers 4.56.0's package metadata); it is the image the examples' engines run, so the
# nodes pull it once.
STAGING_IMAGE = "vllm/vllm-openai:v0.26.0"
# Inside the PVC: the Hugging Face cache (HF_HUB_CACHE of the engines) and the markers.
HUB_SUBDIR = ".hf/hub"
HUB_CACHE = f"{CACHE_MOUNT}/{HUB_SUBDIR}"
MARKER_DIR = f"{CACHE_MOUNT}/.modelplane"
WAIT_CONTAINER = "wait-for-model-cache"
_COMMIT = re.compile(r"^[0-9a-f]{40}$")


def staged_marker(repo: str, revision: str) -> str:
    """The file the staging Job writes once `repo` at `revision` is fully staged."""
    digest = hashlib.sha256(f"{repo}@{revision}".encode()).hexdigest()[:16]
    return f"{MARKER_DIR}/staged-{digest}"


def hugging_face(cache: ModelCache) -> HuggingFace:
    """The cache's `huggingFace` block (the API requires it; a model built otherwise is refused)."""
    hf = cache.spec.hugging_face
    if hf is None:
        raise RenderError(f"ModelCache {cache.metadata.namespace}/{cache.metadata.name} has no spec.huggingFace")
    return hf


def cache_matches(cache: ModelCache, cluster: InferenceCluster) -> bool:
    selector = cache.spec.cluster_selector
    return selector is None or selector.matches(cluster.metadata.labels or {})


def cache_labels(cache: ModelCache, cluster: InferenceCluster) -> dict[str, str]:
    return {LABEL_MANAGED_BY: MANAGED_BY, LABEL_MODELCACHE: cache.metadata.name,
            LABEL_CLUSTER: cluster.metadata.name}


def staging_image(cache: ModelCache) -> str:
    return cache.spec.staging_image or STAGING_IMAGE


def staging_script(repo: str, revision: str) -> str:
    marker = shlex.quote(staged_marker(repo, revision))
    repo_dir = f"{HUB_SUBDIR}/models--{repo.replace('/', '--')}"
    # A commit names its snapshot directly; a branch or tag resolves through refs/<name>,
    # which hf writes when the revision asked for is a name.
    ref = shlex.quote(f"{repo_dir}/refs/{revision}")
    sha = shlex.quote(revision) if _COMMIT.match(revision) else f'"$(cat {ref})"'
    return "\n".join([
        "set -eu",
        f"if [ -f {marker} ]; then echo 'already staged'; exit 0; fi",
        f"hf download {shlex.quote(repo)} --revision {shlex.quote(revision)} --cache-dir {HUB_CACHE}",
        f"cd {CACHE_MOUNT}",
        f"snapshot={shlex.quote(repo_dir)}/snapshots/{sha}",
        # The root is a view of the staged snapshot: drop the previous revision's links, link this one.
        'for entry in *; do',
        '  if [ -L "$entry" ]; then case "$(readlink "$entry")" in .hf/*) rm "$entry";; esac; fi',
        'done',
        'for entry in "$snapshot"/*; do ln -sfn "$entry" "$(basename "$entry")"; done',
        f"mkdir -p {MARKER_DIR} && touch {marker}",
    ])


def wait_for_cache_container(cache: ModelCache, namespace: str) -> Manifest:
    """The init container that holds an engine pod until its cache is staged."""
    hf = hugging_face(cache)
    revision = hf.revision or DEFAULT_REVISION
    marker = shlex.quote(staged_marker(hf.repo, revision))
    job = cache_job_name(namespace, cache.metadata.name)
    message = shlex.quote(f"waiting for ModelCache {namespace}/{cache.metadata.name} ({hf.repo}@{revision}) "
                          f"to be staged by Job {job}")
    return {
        "name": WAIT_CONTAINER, "image": staging_image(cache), "command": ["/bin/sh", "-c"],
        "args": [f"until [ -f {marker} ]; do echo {message}; sleep 10; done"],
        "volumeMounts": [{"name": "model-cache", "mountPath": CACHE_MOUNT, "readOnly": True}],
    }


def _pvc(cache: ModelCache, namespace: str, labels: dict[str, str], storage_class: str, access_mode: str,
         size_gib: int) -> Manifest:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": metadata(cache_pvc_name(namespace, cache.metadata.name), labels, namespace),
        "spec": {
            "accessModes": [access_mode],
            "storageClassName": storage_class,
            "resources": {"requests": {"storage": f"{size_gib}Gi"}},
        },
    }


def _job(cache: ModelCache, namespace: str, labels: dict[str, str]) -> Manifest:
    hf = hugging_face(cache)
    container: Manifest = {
        "name": "hydrate",
        "image": staging_image(cache),
        "command": ["/bin/sh", "-c"],
        "args": [staging_script(hf.repo, hf.revision or DEFAULT_REVISION)],
    }
    if hf.auth_secret is not None:
        # Only the reference: the Secret itself is created by the program from its hfToken
        # secret, or by a GitOps user, so the token never appears in a rendered manifest.
        container["env"] = [{"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {
            "name": cache_secret_name(namespace, cache.metadata.name), "key": hf.auth_secret.key}}}]
    container["volumeMounts"] = [{"name": "model-cache", "mountPath": CACHE_MOUNT}]
    pvc = cache_pvc_name(namespace, cache.metadata.name)
    return with_timeout({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": metadata(cache_job_name(namespace, cache.metadata.name), labels, namespace),
        "spec": {
            "backoffLimit": 3,
            "template": {
                "metadata": {"labels": dict(sorted(labels.items()))},
                "spec": {
                    "restartPolicy": "OnFailure",
                    "containers": [container],
                    "volumes": [{"name": "model-cache", "persistentVolumeClaim": {"claimName": pvc}}],
                },
            },
        },
    }, staging_timeout_s(hf.size_gib))


def render_cache(fleet: Fleet, cache: ModelCache, cluster: InferenceCluster | str) -> list[Manifest]:
    """The PVC and staging Job of one cache on one cluster."""
    cluster = resolve_cluster(fleet, cluster)
    storage_class = cache_storage_class(cluster)
    namespace = cache.metadata.namespace or "default"
    if storage_class is None:
        raise RenderError(f"ModelCache {namespace}/{cache.metadata.name} cannot be staged on "
                          f"InferenceCluster {cluster.metadata.name}: {cache_storage_problem(cluster)}")
    labels = cache_labels(cache, cluster)
    pvc = _pvc(cache, namespace, labels, storage_class, cache_access_mode(cluster),
               cache_request_gib(cluster, hugging_face(cache).size_gib))
    return [pvc, _job(cache, namespace, labels)]
