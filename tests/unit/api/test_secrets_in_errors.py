"""Issue 9, items 1b and 1c: a value at a secret-bearing path never reaches an error, and a
credential in a URL or a Hugging Face repo is refused at load without being quoted."""

from __future__ import annotations

import pytest

from modelplane.api import ManifestError, load_manifest_text
from modelplane.redact import redact_url, secret_bearing

from .test_loader import CACHE as LOADER_CACHE

SECRET = "sk-THE-SECRET-4242"
HF_TOKEN = "hf_" + "A1b2C3d4" * 5

ENDPOINT = """
apiVersion: modelplane.ai/v1alpha1
kind: ModelEndpoint
metadata: {name: together, namespace: ml-team}
spec:
  origin: https://api.together.xyz
  credential: %s
"""

# test_loader's ModelCache with the repo and the authSecret line to fill in
CACHE = (LOADER_CACHE.replace("repo: Qwen/Qwen2.5-7B-Instruct", "repo: %s")
         .replace("    authSecret: {name: hf}\n", "    %s\n"))

CLUSTER = """
apiVersion: modelplane.ai/v1alpha1
kind: InferenceCluster
metadata: {name: byo}
spec:
  cluster:
    source: Existing
    existing: {secretRef: %s}
"""

DEPLOYMENT_ENV = """
apiVersion: modelplane.ai/v1alpha1
kind: ModelDeployment
metadata: {name: m, namespace: ml-team}
spec:
  replicas: 1
  template:
    spec:
      engines:
      - name: main
        members:
        - nodeSelector:
            devices: [{name: gpu, selectors: [{cel: "true"}]}]
          template:
            spec:
              containers:
              - name: engine
                image: vllm
                env:
                - name: HF_TOKEN
                  valueFrom: {secretKeyRef: %s}
"""


def load_error(text: str) -> str:
    with pytest.raises(ManifestError) as err:
        load_manifest_text(text, source="fleet.yaml")
    return str(err.value)


@pytest.mark.parametrize("text, path", [
    (ENDPOINT % f"{{apiKey: {SECRET}}}", "spec.credential.apiKey"),
    (ENDPOINT % f"{{apiKey: {{secretRef: {SECRET}}}}}", "spec.credential.apiKey.secretRef"),
    (ENDPOINT % SECRET, "spec.credential"),
    (CACHE % ("Qwen/Qwen3-0.6B", f"authSecret: {SECRET}"), "spec.huggingFace.authSecret"),
    (CLUSTER % SECRET, "spec.cluster.existing.secretRef"),
    (DEPLOYMENT_ENV % SECRET,
     "spec.template.spec.engines[0].members[0].template.spec.containers[0].env[0].valueFrom.secretKeyRef"),
    (ENDPOINT % "{apiKey: {secretRef: {name: k, key: 12345678987654321}}}",
     "spec.credential.apiKey.secretRef.key"),
])
def test_1b_validation_errors_never_echo_a_secret_bearing_value(text, path):
    message = load_error(text)
    assert f"at {path}: " in message
    assert SECRET not in message and "12345678987654321" not in message
    assert "not shown" in message


def test_1b_a_plain_secret_where_a_reference_belongs_says_the_fix():
    message = load_error(CACHE % ("Qwen/Qwen3-0.6B", f"authSecret: {SECRET}"))
    assert ("this field names a Kubernetes Secret and never holds the secret itself. Fix: store the value "
            "in a Secret and reference it here as {key: ..., name: ...}") in message


def test_1b_values_elsewhere_are_still_quoted_and_shortened():
    message = load_error((CACHE % ("Qwen/Qwen3-0.6B", "")).replace("sizeGiB: 40", "sizeGiB: 0"))
    assert "at spec.huggingFace.sizeGiB: Input should be greater than or equal to 1 (got 0)" in message
    long_name = "x" * 300
    message = load_error(CACHE.replace("name: qwen", f"name: {long_name}") % ("Qwen/Qwen3-0.6B", ""))
    assert long_name not in message


@pytest.mark.parametrize("repo, problem", [
    (f"https://user:{HF_TOKEN}@huggingface.co/Qwen/Qwen3-0.6B", "carries credentials in its user-info part"),
    ("https://bob:hunter2@huggingface.co/Qwen/Qwen3-0.6B", "carries credentials in its user-info part"),
    (f"Qwen/{HF_TOKEN}", "carries a Hugging Face access token"),
    ("https://huggingface.co/Qwen/Qwen3-0.6B", "is a URL"),
    ("Qwen/Qwen3 0.6B", "is not a Hugging Face repo id"),
])
def test_1c_a_token_in_the_hugging_face_repo_is_refused_at_load(repo, problem):
    message = load_error(CACHE % (repo, ""))
    assert f"at spec.huggingFace.repo: huggingFace.repo {problem}" in message
    assert "huggingFace.authSecret" in message
    assert HF_TOKEN not in message and "hunter2" not in message and repo not in message


@pytest.mark.parametrize("url", [
    "https://bob:PASSWORD@api.example.com/v1",
    "https://bob@api.example.com/v1",
    "https://api.example.com/v1?token=PASSWORD",
])
def test_1c_an_endpoint_url_with_credentials_is_a_load_error_for_every_command(url):
    text = ENDPOINT.replace("origin: https://api.together.xyz\n  credential: %s\n", f"url: {url}\n")
    message = load_error(text)
    assert "at spec.url: the URL carries" in message and "PASSWORD" not in message and "bob" not in message


def test_1c_a_malformed_url_is_reported_redacted():
    text = ENDPOINT.replace("origin: https://api.together.xyz\n  credential: %s\n", "url: http://[::1\n")
    assert "spec.url 'http://[::1' is not a valid URL" in load_error(text)


@pytest.mark.parametrize("url, shown", [
    ("https://bob:PASSWORD@host:8443/v1", "https://host:8443/v1"),
    ("https://bob:p@ss@host/v1", "https://host/v1"),
    ("http://[::1", "http://[::1"),
    ("https://host/v1?api_key=abc&model=x#frag", "https://host/v1?api_key=REDACTED&model=x#frag"),
    (f"https://host/{HF_TOKEN}/x", "https://host/REDACTED/x"),
    ("not a url at all", "not a url at all"),
])
def test_redact_url_removes_user_info_and_credential_values(url, shown):
    assert redact_url(url) == shown
    assert "PASSWORD" not in shown and "abc" not in shown and HF_TOKEN not in shown


@pytest.mark.parametrize("path, secret", [
    (("spec", "credential", "apiKey", "secretRef", "name"), True),
    (("spec", "huggingFace", "authSecret"), True),
    (("spec", "template", "spec", "engines", 0, "members", 0, "template", "spec", "containers", 0, "args", 3), True),
    (("spec", "url"), True),
    (("spec", "huggingFace", "repo"), True),
    (("spec", "huggingFace", "sizeGiB"), False),
    (("spec", "replicas"), False),
    (("metadata", "name"), False),
])
def test_secret_bearing_paths_have_one_definition(path, secret):
    assert secret_bearing(path) is secret
