"""An autoscaled SGLang engine must serve /metrics, which SGLang does only with
`--enable-metrics` (sgl-project/sglang python/sglang/srt/entrypoints/http_server.py: the
Prometheus middleware that serves /metrics is added only `if server_args.enable_metrics`; the
flag is off by default in srt/server_args.py). The renderer adds the flag to command lines it
owns; `lint` reports a hand-written command that lacks it."""

from __future__ import annotations

from modelplane.plan import plan_fleet
from modelplane.scheduler import place_fleet
from tests.unit.checks.fleets import base, fleet, messages

AUTOSCALER = """
apiVersion: placement.modelplane-pulumi.dev/v1alpha1
kind: ReplicaAutoscaler
metadata: {name: sgl, namespace: ml}
spec:
  scaleTargetRef: {name: sgl}
  minReplicas: 1
  maxReplicas: 2
  metrics: [{type: QueueDepth, target: {averageValue: 4}}]
"""


def sglang(container: str, image: str = "lmsysorg/sglang:v0.5.17") -> str:
    return f"""
apiVersion: modelplane.ai/v1alpha1
kind: ModelDeployment
metadata: {{name: sgl, namespace: ml}}
spec:
  replicas: 1
  template:
    spec:
      engines:
      - name: main
        members:
        - nodeSelector:
            devices: [{{name: gpu, count: 1, selectors: [{{cel: 'device.driver == "gpu.nvidia.com"'}}]}}]
          template: {{spec: {{containers: [{{name: engine, image: {image}, {container}}}]}}}}
"""


ARGS_ONLY = "args: [python3, -m, sglang.launch_server, --model-path, Qwen/Qwen3-8B, --port, '8000']"
COMMAND = "command: [python3, -m, sglang.launch_server], args: [--model-path, Qwen/Qwen3-8B, --port, '8000']"


def _engine_args(*docs: str) -> list[str]:
    f = fleet(*docs)
    objects = [o for plan in plan_fleet(f, place_fleet(f)).clusters.values() for o in plan.objects()]
    [deployment] = [o for o in objects if o["kind"] == "Deployment" and o["metadata"]["name"].startswith("sgl-")]
    return list(deployment["spec"]["template"]["spec"]["containers"][0].get("args", []))


def test_an_autoscaled_sglang_engine_is_started_with_enable_metrics() -> None:
    autoscaled = _engine_args(*base(deployment=sglang(ARGS_ONLY)), AUTOSCALER)
    assert autoscaled.count("--enable-metrics") == 1 and autoscaled[:3] == ["python3", "-m", "sglang.launch_server"]
    # Nothing reads the metrics of a deployment no autoscaler scales; vLLM serves them anyway.
    assert "--enable-metrics" not in _engine_args(*base(deployment=sglang(ARGS_ONLY)))
    vllm = sglang("args: [Qwen/Qwen3-8B]", image="vllm/vllm-openai:v0.26.0")
    assert "--enable-metrics" not in _engine_args(*base(deployment=vllm), AUTOSCALER)
    # Already there: not twice.
    given = ARGS_ONLY.replace("'8000'", "'8000', --enable-metrics")
    assert _engine_args(*base(deployment=sglang(given)), AUTOSCALER).count("--enable-metrics") == 1


def test_lint_reports_an_autoscaled_sglang_command_without_enable_metrics() -> None:
    docs = [*base(deployment=sglang(COMMAND)), AUTOSCALER]
    [message] = messages(docs, "sglang-metrics")
    assert message.startswith("[mandatory] sglang-metrics: ModelDeployment/ml/sgl (fleet.yaml#2) "
                              "spec.template.spec.engines[0].members[0].template.spec.containers[0].command: "
                              "engine 'main' runs SGLang with a hand-written command that lacks --enable-metrics")
    # The renderer owns the command line, the flag is there, or nothing scales it: no finding.
    assert messages([*base(deployment=sglang(ARGS_ONLY)), AUTOSCALER], "sglang-metrics") == []
    fixed = COMMAND.replace("'8000']", "'8000', --enable-metrics]")
    assert messages([*base(deployment=sglang(fixed)), AUTOSCALER], "sglang-metrics") == []
    assert messages(base(deployment=sglang(COMMAND)), "sglang-metrics") == []
    # The hand-written command keeps its own args: the renderer adds nothing to it.
    assert "--enable-metrics" not in _engine_args(*docs)
