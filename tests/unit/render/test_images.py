"""Nothing is installed at run time: in a VPC without egress a `pip install` in a pod fails.
The SGLang PD router, the vLLM P/D router and the cache staging Job run from images that carry
what they need (modelplane.render.pd_router.ROUTERS: sgl-project/sglang docker/Dockerfile.router,
vllm-project/router Dockerfile.router; modelplane.render.cache.STAGING_IMAGE: vLLM's image, whose
vllm requires transformers >= 4.56 (vllm requirements/common.txt), which requires
huggingface-hub >= 0.34, the first with the `hf` CLI), or from the image the manifests name."""

from __future__ import annotations

from pathlib import Path

import pytest

from modelplane.api import load_manifest_text, load_manifests
from modelplane.plan import plan_fleet
from modelplane.render.cache import STAGING_IMAGE
from modelplane.scheduler import place_fleet

from .fleets import full_fleet, place

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def _containers(obj: dict) -> list[dict]:
    spec = obj.get("spec") or {}
    templates = [spec.get("template")] if obj["kind"] in ("Deployment", "Job", "DaemonSet") else []
    lws = spec.get("leaderWorkerTemplate") or {}
    templates += [lws.get("leaderTemplate"), lws.get("workerTemplate")]
    templates += [c.get("spec") and {"spec": c["spec"].get("podSpec")} for c in (spec.get("template") or {}).get(
        "cliques", [])] if obj["kind"] == "PodCliqueSet" else []
    out = []
    for t in templates:
        pod = (t or {}).get("spec") or {}
        out += list(pod.get("initContainers") or []) + list(pod.get("containers") or [])
    return out


@pytest.mark.parametrize("example", sorted(p.name for p in EXAMPLES.iterdir() if p.is_dir()))
def test_no_rendered_container_installs_anything_at_run_time(example: str) -> None:
    fleet = load_manifests(EXAMPLES / example)
    plan = plan_fleet(fleet, place_fleet(fleet))
    seen = 0
    for cluster in plan.clusters.values():
        for obj in cluster.objects():
            for container in _containers(obj):
                seen += 1
                words = " ".join([*container.get("command", []), *container.get("args", [])])
                assert "pip install" not in words and "pip3 install" not in words, (obj["metadata"]["name"], words)
    assert seen


def _qwen_job(objects: list[dict]) -> dict:
    [job] = [o for o in objects if o["kind"] == "Job" and "-qwen-" in o["metadata"]["name"]]
    return job


def test_the_staging_image_is_declared_with_a_default_that_carries_hf() -> None:
    """ModelCache `spec.stagingImage` (a mirror in a VPC without egress) names the image the
    staging Job and the engines' wait run in; by default STAGING_IMAGE."""
    fl = full_fleet()
    rep = place(fl, "ml-team", "chat", "kind-a")
    default = plan_fleet(fl, _placement(fl, rep)).clusters["kind-a"].objects()
    assert {c["image"] for c in _containers(_qwen_job(default))} == {STAGING_IMAGE}
    mirrored = fl.caches[("ml-team", "qwen")].model_copy(deep=True)
    mirrored.spec.staging_image = "registry.internal/hf-cli:1"
    fl.caches[("ml-team", "qwen")] = mirrored
    objects = plan_fleet(fl, _placement(fl, rep)).clusters["kind-a"].objects()
    assert {c["image"] for c in _containers(_qwen_job(objects))} == {"registry.internal/hf-cli:1"}
    waits = [c for o in objects for c in _containers(o) if c["name"] == "wait-for-model-cache"]
    assert waits and {c["image"] for c in waits} == {"registry.internal/hf-cli:1"}


def _placement(fl, rep):
    from modelplane.scheduler import DeploymentPlacement, FleetPlacement

    return FleetPlacement([DeploymentPlacement(namespace="ml-team", name="chat", desired=1, replicas=[rep])])


def test_image_fields_are_strings_of_bounded_length() -> None:
    long = "x" * 600
    with pytest.raises(ValueError, match="stagingImage"):
        load_manifest_text(f"""
apiVersion: modelplane.ai/v1alpha1
kind: ModelCache
metadata: {{name: c, namespace: ml}}
spec: {{source: HuggingFace, huggingFace: {{repo: org/m, sizeGiB: 1}}, stagingImage: {long}}}
""")
