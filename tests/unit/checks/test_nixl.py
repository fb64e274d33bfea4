import pytest

from modelplane.checks.nixl import split_image

from .fleets import base, messages

POLICY = "prefill-decode-needs-nixl"
PD = """
apiVersion: modelplane.ai/v1alpha1
kind: ModelDeployment
metadata:
  name: llama-pd
  namespace: ml-team
%(annotations)s
spec:
  replicas: 1
  template:
    spec:
      serving: {mode: PrefillDecode}
      engines:
      - name: prefill
        phase: Prefill
        members:
        - nodeSelector:
            devices:
            - name: gpu
              count: 4
              selectors:
              - cel: device.driver == "gpu.nvidia.com"
          template:
            spec:
              containers:
              - name: engine
                image: %(image)s
                args: [meta-llama/Llama-3.1-8B-Instruct, --kv-transfer-config,
                       '{"kv_connector":"NixlConnector","kv_role":"kv_producer"}']
      - name: decode
        phase: Decode
        members:
        - nodeSelector:
            devices:
            - name: gpu
              count: 4
              selectors:
              - cel: device.driver == "gpu.nvidia.com"
          template:
            spec:
              containers:
              - name: engine
                image: vllm/vllm-openai:v0.21.0
                args: [meta-llama/Llama-3.1-8B-Instruct, --kv-transfer-config,
                       '{"kv_connector":"NixlConnector","kv_role":"kv_consumer"}']
"""
HEAD = ("[mandatory] prefill-decode-needs-nixl: ModelDeployment/ml-team/llama-pd (fleet.yaml#2) "
        "spec.template.spec.engines[0].members[0].template.spec.containers[0].image: Prefill engine 'prefill': ")
TAIL = ("; the NixlConnector KV transfer will crash it at startup with \"RuntimeError: NIXL is not "
        "available\". Fix: use vllm/vllm-openai:v0.20.1 or newer, or, if this image does ship NIXL "
        "(python3 -c \"from nixl._api import nixl_agent\" succeeds in it), annotate the ModelDeployment "
        "with metadata.annotations: {modelplane.ai/nixl: \"true\"}.")


def pd(image: str, annotations: str = "") -> str:
    return PD % {"image": image, "annotations": annotations}


@pytest.mark.parametrize("image", [
    "vllm/vllm-openai:v0.20.1",
    "docker.io/vllm/vllm-openai:v0.22.0-cu130",
    "vllm/vllm-openai:v0.21.0@sha256:0123abcd",
])
def test_images_known_to_ship_nixl_pass(image):
    assert messages(base(deployment=pd(image)), POLICY) == []


def test_unified_serving_needs_no_nixl():
    assert messages(base(), POLICY) == []


@pytest.mark.parametrize("image, problem", [
    ("vllm/vllm-openai:v0.19.1",
     "image 'vllm/vllm-openai:v0.19.1' predates v0.20.1, the first vllm/vllm-openai tag known to ship NIXL"),
    ("vllm/vllm-openai:latest",
     "image 'vllm/vllm-openai:latest' is tagged 'latest', which names no version, so it cannot be "
     "checked against v0.20.1, the first vllm/vllm-openai tag known to ship NIXL"),
    ("vllm/vllm-openai@sha256:0123abcd",
     "image 'vllm/vllm-openai@sha256:0123abcd' has no version tag, so it cannot be checked against "
     "v0.20.1, the first vllm/vllm-openai tag known to ship NIXL"),
    ("vllm/vllm-openai:v0.21.0-rocm",
     "image 'vllm/vllm-openai:v0.21.0-rocm' is a ROCm build, and ROCm builds of vllm/vllm-openai ship no NIXL"),
    ("myorg/engine:1.2.3",
     "image 'myorg/engine:1.2.3' is not in the table of images known to ship NIXL "
     "(vllm/vllm-openai >= v0.20.1)"),
])
def test_images_not_known_to_ship_nixl_fail(image, problem):
    assert messages(base(deployment=pd(image)), POLICY) == [HEAD + problem + TAIL]


def test_explicit_annotation_vouches_for_a_custom_image():
    annotated = pd("myorg/engine:1.2.3", '  annotations: {modelplane.ai/nixl: "true"}')
    assert messages(base(deployment=annotated), POLICY) == []


def test_config_extends_the_image_table():
    options = {POLICY: {"images": {"myorg/engine": "1.0.0"}}}
    assert messages(base(deployment=pd("myorg/engine:1.2.3")), POLICY, options=options) == []
    assert len(messages(base(deployment=pd("myorg/engine:0.9.0")), POLICY, options=options)) == 1


def test_split_image():
    assert split_image("docker.io/library/vllm:1") == ("vllm", "1")
    assert split_image("localhost:5000/vllm/vllm-openai") == ("localhost:5000/vllm/vllm-openai", None)
    assert split_image("ghcr.io/x/y:v1@sha256:ab") == ("ghcr.io/x/y", "v1")
