import pytest

from .fleets import base, deployment, messages

POLICY = "cache-revision-match"
CACHE = """
apiVersion: modelplane.ai/v1alpha1
kind: ModelCache
metadata:
  name: llama
  namespace: ml-team
spec:
  source: HuggingFace
  huggingFace:
    repo: meta-llama/Llama-3.1-8B-Instruct
    %s
    authSecret: {name: hf-token}
    sizeGiB: 40
"""
HEAD = ("[mandatory] cache-revision-match: ModelDeployment/ml-team/llama (fleet.yaml#2) "
        "spec.template.spec.engines[0].members[0].template.spec.containers[0].")
TAIL = ("the engine will not find the staged snapshot, so it fails at startup under the HF_HUB_OFFLINE=1 "
        "the program sets (with Hub access it would download the whole model again). Fix: ")


def cache(revision=None):
    return CACHE % (f"revision: {revision}" if revision else "")


def serving(args: str) -> str:
    d = deployment().replace("      engines:\n", "      modelCacheRef: {name: llama}\n      engines:\n")
    return d.replace('args: [meta-llama/Llama-3.1-8B-Instruct, --tensor-parallel-size, "8"]', f"args: {args}")


@pytest.mark.parametrize("revision, args", [
    ("v1.0", "[meta-llama/Llama-3.1-8B-Instruct, --revision, v1.0]"),
    ("v1.0", '[meta-llama/Llama-3.1-8B-Instruct, "--revision=v1.0"]'),
    (None, "[meta-llama/Llama-3.1-8B-Instruct]"),
    ("main", "[meta-llama/Llama-3.1-8B-Instruct]"),           # main is the default branch
    ("v1.0", '["--model=/mnt/models"]'),                        # a local path reads files, no ref
    ("v1.0", '["sh", "-c", "vllm serve meta-llama/Llama-3.1-8B-Instruct --revision v1.0"]'),
    ("0e9e39f", "[meta-llama/Llama-3.1-8B-Instruct]"),          # the renderer appends --revision 0e9e39f
    ("0e9e39f", '[meta-llama/Llama-3.1-8B-Instruct, "--revision=$(MODELPLANE_MODEL_REVISION)"]'),
])
def test_matching_revisions_pass(revision, args):
    assert messages(base(cache=cache(revision), deployment=serving(args)), POLICY) == []


def custom_command(command: str) -> str:
    return serving("[]").replace("                args: []", f"                command: {command}")


def test_pinned_cache_and_custom_command_without_revision_fails():
    got = messages(base(cache=cache("0e9e39f"), deployment=custom_command(
        "[vllm, serve, meta-llama/Llama-3.1-8B-Instruct]")), POLICY)
    assert got == [
        HEAD + "command: engine 'vllm' asks for the default branch of meta-llama/Llama-3.1-8B-Instruct "
        "(its own command names the repo without --revision) but ModelCache/ml-team/llama (fleet.yaml#3) "
        "stages revision '0e9e39f' (spec.huggingFace.revision: 0e9e39f): " + TAIL + "add --revision "
        "$(MODELPLANE_MODEL_REVISION) (the staged revision, set by the program) or --revision 0e9e39f to "
        "the engine's command line."
    ]


def test_custom_commands_that_pass_the_revision_or_serve_something_else_pass():
    assert messages(base(cache=cache("0e9e39f"), deployment=custom_command(
        '["sh", "-c", "vllm serve meta-llama/Llama-3.1-8B-Instruct --revision $MODELPLANE_MODEL_REVISION"]')),
        POLICY) == []
    assert messages(base(cache=cache("0e9e39f"), deployment=custom_command(
        "[python, /opt/modelplane/mock_engine.py]")), POLICY) == []
    assert messages(base(cache=cache(), deployment=custom_command(
        "[vllm, serve, meta-llama/Llama-3.1-8B-Instruct]")), POLICY) == []


def test_bare_cache_and_pinned_engine_fails():
    got = messages(base(cache=cache(), deployment=serving(
        "[meta-llama/Llama-3.1-8B-Instruct, --revision, v1.1]")), POLICY)
    assert got == [
        HEAD + "args[2]: engine 'vllm' asks for revision 'v1.1' of meta-llama/Llama-3.1-8B-Instruct "
        "(--revision v1.1) but ModelCache/ml-team/llama (fleet.yaml#3) stages the default branch "
        "(no spec.huggingFace.revision): " + TAIL + "remove --revision v1.1 from the engine's args, or "
        "pin the cache with spec.huggingFace.revision: v1.1."
    ]


def test_two_different_pins_fail():
    got = messages(base(cache=cache("v1.0"), deployment=serving(
        '[meta-llama/Llama-3.1-8B-Instruct, "--revision=v1.1"]')), POLICY)
    assert got == [
        HEAD + "args[1]: engine 'vllm' asks for revision 'v1.1' of meta-llama/Llama-3.1-8B-Instruct "
        "(--revision v1.1) but ModelCache/ml-team/llama (fleet.yaml#3) stages revision 'v1.0' "
        "(spec.huggingFace.revision: v1.0): " + TAIL + "change the engine's --revision to v1.0 (or to "
        "$(MODELPLANE_MODEL_REVISION)), or set spec.huggingFace.revision: v1.1 on the cache."
    ]
