import pytest

from modelplane.api import ManifestError
from modelplane.checks import ProgramResource, run_checks
from modelplane.checks.secrets import SecretString, resource_findings, secret_like

from .fleets import base, deployment, fleet, messages

HEAD = ("[mandatory] secrets: ModelDeployment/ml-team/llama (fleet.yaml#2) "
        "spec.template.spec.engines[0].members[0].template.spec.containers[0].")
ENV_FIX = "Fix: use valueFrom.secretKeyRef naming a Kubernetes Secret (e.g. {name: hf-token, key: HF_TOKEN})."
PLAIN = ("is a plaintext Pulumi input: it is stored unencrypted in the state file and shown in previews "
         "and diffs. Fix: pass it as a secret (pulumi.Config().require_secret(...) or pulumi.Output.secret(...)).")
ENDPOINT = """
apiVersion: modelplane.ai/v1alpha1
kind: ModelEndpoint
metadata:
  name: together
  namespace: ml-team
spec:
  %s
"""


def with_env(env: str) -> str:
    return deployment().replace(
        'args: [meta-llama/Llama-3.1-8B-Instruct, --tensor-parallel-size, "8"]',
        "args: [meta-llama/Llama-3.1-8B-Instruct]\n                env:\n" + env)


def test_secret_references_pass():
    env = ("                - name: HF_TOKEN\n"
           "                  valueFrom: {secretKeyRef: {name: hf-token, key: HF_TOKEN}}\n"
           "                - name: TOKENIZERS_PARALLELISM\n"
           "                  value: 'false'\n")
    args = deployment().replace('"8"]', '"8", "--api-key=$(VLLM_API_KEY)"]')
    saas = ENDPOINT % ("origin: https://api.together.xyz\n"
                       "  credential: {apiKey: {secretRef: {name: together, key: apiKey}}}")
    assert messages(base(deployment=with_env(env), endpoint=saas), "secrets") == []
    assert messages(base(deployment=args), "secrets") == []


def test_literal_token_in_an_engine_env_fails():
    env = "                - name: HF_TOKEN\n                  value: hf_abcdefghijklmnop\n"
    assert messages(base(deployment=with_env(env)), "secrets") == [
        HEAD + "env[0].value: environment variable HF_TOKEN of engine 'vllm' is a literal in the manifest: "
        "the token is readable by anyone who can read the manifest or the workload, and lands unencrypted "
        "in the Pulumi state. " + ENV_FIX
    ]


def test_api_key_from_a_config_map_fails():
    env = ("                - name: OPENAI_API_KEY\n"
           "                  valueFrom: {configMapKeyRef: {name: keys, key: openai}}\n")
    assert messages(base(deployment=with_env(env)), "secrets") == [
        HEAD + "env[0].valueFrom.configMapKeyRef: environment variable OPENAI_API_KEY of engine 'vllm' comes "
        "from a ConfigMap, which is stored and shown in plain text. " + ENV_FIX
    ]


def test_literal_api_key_flag_fails():
    args = deployment().replace('"8"]', '"8", --api-key, sk-live-123]')
    assert messages(base(deployment=args), "secrets") == [
        HEAD + "args[4]: engine 'vllm' passes a literal value to --api-key on its command line, readable in "
        "the manifest, the pod spec and the process list. Fix: set an env var from valueFrom.secretKeyRef "
        "and pass --api-key=$(VAR_NAME)."
    ]


@pytest.mark.parametrize("url, problem", [
    ("https://user:sk-123@api.together.xyz/v1", "carries credentials in its user-info part"),
    ("https://api.example.com/v1?api_key=sk-123", "carries the query parameter 'api_key'"),
])
def test_hand_written_endpoint_with_an_inline_key_is_refused_at_load(url, problem):
    # A key in a ModelEndpoint URL is a load error for every command (lint included), not a
    # finding only lint reports; the key itself is never printed.
    with pytest.raises(ManifestError) as err:
        fleet(*base(endpoint=ENDPOINT % f"url: {url}"))
    message = str(err.value)
    assert f"(ModelEndpoint ml-team/together) at spec.url: the URL {problem}" in message
    assert "spec.credential.apiKey.secretRef {name, key}" in message
    assert "sk-123" not in message


def test_program_secret_data_must_be_a_pulumi_secret():
    plain = ProgramResource("kubernetes:core/v1:Secret", "hf-token", {"stringData": {"HF_TOKEN": "hf_x"}})
    marked = ProgramResource("kubernetes:core/v1:Secret", "hf-token",
                             {"stringData": {"HF_TOKEN": SecretString("hf_x")}})
    assert [str(f) for f in resource_findings(plain)] == [
        "[mandatory] secrets: kubernetes:core/v1:Secret 'hf-token' stringData.HF_TOKEN: Secret data " + PLAIN
    ]
    assert resource_findings(marked) == []


def test_program_component_token_inputs_must_be_pulumi_secrets():
    plain = ProgramResource("modelplane:index:ModelCache", "llama", {"repo": "meta-llama/x", "hfToken": "hf_x"})
    marked = ProgramResource("modelplane:index:ModelCache", "llama", {"hfToken": SecretString("hf_x")})
    unknown = ProgramResource("modelplane:index:ModelCache", "llama", {"hfToken": "hf_x"}, secrets_marked=False)
    assert [str(f) for f in resource_findings(plain)] == [
        "[mandatory] secrets: modelplane:index:ModelCache 'llama' hfToken: hfToken " + PLAIN
    ]
    assert resource_findings(marked) == [] and resource_findings(unknown) == []


def test_program_pod_env_literal_fails_even_when_secret():
    pod = {"spec": {"template": {"spec": {"containers": [
        {"name": "engine", "env": [{"name": "HF_TOKEN", "value": SecretString("hf_x")},
                                   {"name": "HF_HOME", "value": "/mnt/models"}]}]}}}}
    found = resource_findings(ProgramResource("kubernetes:apps/v1:Deployment", "llama", pod))
    assert [str(f) for f in found] == [
        "[mandatory] secrets: kubernetes:apps/v1:Deployment 'llama' spec.template.spec.containers[0].env[0].value: "
        "environment variable HF_TOKEN has a literal value in the pod spec: anyone who can read the workload "
        "sees the token, secret input or not. " + ENV_FIX
    ]


def test_program_resources_run_through_run_checks():
    plain = ProgramResource("modelplane:index:ModelCache", "llama", {"hfToken": "hf_x"})
    got = [f for f in run_checks(fleet(*base()), program=[plain]) if f.policy == "secrets"]
    assert [f.field for f in got] == ["hfToken"]


@pytest.mark.parametrize("name, expected", [
    ("HF_TOKEN", True), ("hfToken", True), ("OPENAI_API_KEY", True), ("apiKey", True),
    ("HUGGING_FACE_HUB_TOKEN", True), ("password", True),
    ("TOKENIZERS_PARALLELISM", False), ("maxTokens", False), ("authSecret", False), ("secretName", False),
])
def test_secret_like_names(name, expected):
    assert secret_like(name) is expected
