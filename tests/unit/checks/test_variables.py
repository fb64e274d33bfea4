"""engine-variables: `lint` (and the pack) refuse a manifest whose engine refers to a variable
Kubernetes would leave literal (kubernetes/kubernetes third_party/forked/golang/expansion/
expand.go; pkg/kubelet/kubelet_pods.go makeEnvironmentVariables: env values see earlier entries
only; pkg/kubelet/container/helpers.go ExpandContainerCommandAndArgs: command/args the whole env)."""

from __future__ import annotations

from pathlib import Path

from modelplane.api import load_manifests
from modelplane.checks import MANDATORY

from .fleets import base, findings

POLICY = "engine-variables"
EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def _deployment(args: str, env: str = "[]") -> str:
    return f"""
apiVersion: modelplane.ai/v1alpha1
kind: ModelDeployment
metadata: {{name: llama, namespace: ml-team}}
spec:
  replicas: 1
  template:
    spec:
      engines:
      - name: vllm
        members:
        - role: Standalone
          nodeSelector:
            devices:
            - name: gpu
              count: 8
              selectors: [{{cel: 'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("79Gi")) >= 0'}}]
          template:
            spec:
              containers:
              - name: engine
                image: vllm/vllm-openai:v0.20.1
                command: [sh, -c]
                args: {args}
                env: {env}
"""


def test_a_reference_to_a_variable_nobody_defines_is_refused_at_its_field() -> None:
    got = findings(base(deployment=_deployment('["vllm serve m --master-addr $(MODELPLANE_LEADER_ADDRESS)"]')),
                   POLICY)
    assert [(f.level, f.field) for f in got] == [
        (MANDATORY, "spec.template.spec.engines[0].members[0].template.spec.containers[0].args[0]")]
    assert "$(MODELPLANE_LEADER_ADDRESS) is not defined" in got[0].message
    assert "InferenceCluster/byo" in got[0].message


def test_an_env_value_referring_to_a_later_entry_is_refused() -> None:
    env = '[{name: URL, value: "http://$(HOST):8000"}, {name: HOST, value: leader}]'
    got = findings(base(deployment=_deployment('["vllm serve m --url $(URL)"]', env)), POLICY)
    assert [f.field for f in got] == ["spec.template.spec.engines[0].members[0].template.spec.containers[0].env[0]"]
    assert "defined only after this entry" in got[0].message


def test_a_variable_with_an_empty_value_leaves_its_flag_without_one() -> None:
    env = '[{name: EXTRA, value: ""}]'
    got = findings(base(deployment=_deployment('["vllm serve m --tokenizer $(EXTRA) --trust-remote-code"]', env)),
                   POLICY)
    assert len(got) == 1 and "left without its value" in got[0].message


def test_the_programs_own_variables_and_shell_substitutions_pass() -> None:
    args = ('["vllm serve m --served-model-name $(MODELPLANE_SERVED_MODEL_NAME) '
            '--load-format $(MODELPLANE_LOAD_FORMAT) --host $(hostname) $$(NOT_A_REFERENCE)"]')
    assert findings(base(deployment=_deployment(args)), POLICY) == []


def test_every_example_fleet_passes() -> None:
    for example in sorted(p for p in EXAMPLES.iterdir() if p.is_dir()):
        from modelplane.checks import run_checks

        assert [str(f) for f in run_checks(load_manifests(example)) if f.policy == POLICY] == [], example.name
