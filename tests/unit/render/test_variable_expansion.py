"""Contract: every `$(VAR)` a rendered container uses expands, by Kubernetes' own rules and with
what LeaderWorkerSet, Grove and the downward API inject and where (modelplane.render.variables
states each rule with its source)."""

from __future__ import annotations

from pathlib import Path

import pytest

from modelplane.api import load_manifest_text, load_manifests
from modelplane.plan import plan_fleet
from modelplane.render import render_replica
from modelplane.render.variables import (
    GROVE_POD_APPENDED,
    LWS_PREPENDED,
    Injected,
    container_unresolved,
    pod_templates,
    references,
    workload_unresolved,
)
from modelplane.scheduler import place_fleet

from .fleets import CACHES, fleet, one, place

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
EXAMPLE_DIRS = sorted(p.name for p in EXAMPLES.iterdir() if p.is_dir())


def _workloads(fleet_dir: Path) -> list[tuple[str, dict[str, object]]]:
    fleet = load_manifests(fleet_dir)
    plan = plan_fleet(fleet, place_fleet(fleet))
    return [(name, obj) for name, cluster in plan.clusters.items() for obj in cluster.objects()
            if any(True for _ in pod_templates(obj))]


def test_kubernetes_variable_references_are_read_as_expand_go_reads_them() -> None:
    """kubernetes/kubernetes third_party/forked/golang/expansion/expand.go: `$(NAME)` is a
    reference, `$$` escapes the operator, an unclosed `$(` is literal text."""
    assert references("--a=$(A) $(B)x") == ["A", "B"]
    assert references("$$(ESCAPED) $(C)") == ["C"]
    assert references("$((GROVE_PCLQ_POD_INDEX + 1))") == ["(GROVE_PCLQ_POD_INDEX + 1"]
    assert references("unclosed $(D") == []


def test_env_values_expand_from_earlier_entries_only_and_args_from_the_whole_environment() -> None:
    """kubernetes/kubernetes pkg/kubelet/kubelet_pods.go makeEnvironmentVariables (env values
    expand against the entries before them) and pkg/kubelet/container/helpers.go
    ExpandContainerCommandAndArgs (command/args against every entry)."""
    container = {"name": "engine", "env": [{"name": "A", "value": "$(B)"}, {"name": "B", "value": "b"},
                                           {"name": "E", "value": ""}],
                 "args": ["--b=$(B)", "--a", "$(A)", "--c", "$(C)", "--e", "$(E)", "$(hostname)"]}
    problems = {(p.field, p.name): p.reason for p in container_unresolved(container)}
    assert set(problems) == {("env[0] (A)", "B"), ("args[4]", "C"), ("args[6]", "E")}
    assert "earlier entries only" in problems[("env[0] (A)", "B")]
    assert "left without its value" in problems[("args[6]", "E")]


def test_grove_appends_its_variables_after_the_containers_env() -> None:
    """ai-dynamo/grove v0.1.0-alpha.11 operator/internal/controller/common/component/utils/pod.go
    AddEnvVarsToContainers appends (`append(containers[i].Env, envVars...)`), so an env value
    cannot refer to GROVE_*; LWS prepends (kubernetes-sigs/lws pkg/utils/pod/pod_utils.go
    addEnvVarsIfNotExists), so it can refer to LWS_*."""
    env = [{"name": "LEADER", "value": "$(GROVE_HEADLESS_SERVICE)"}]
    grove = container_unresolved({"name": "engine", "env": env, "args": ["$(GROVE_PCLQ_POD_INDEX)"]},
                                 Injected(after=GROVE_POD_APPENDED, by="Grove"))
    assert [(p.field, p.name) for p in grove] == [("env[0] (LEADER)", "GROVE_HEADLESS_SERVICE")]
    assert "Grove appends it" in grove[0].reason
    lws = container_unresolved({"name": "engine", "env": [{"name": "L", "value": "$(LWS_LEADER_ADDRESS)"}]},
                               Injected(before=LWS_PREPENDED, by="LeaderWorkerSet"))
    assert lws == []


@pytest.mark.parametrize("example", EXAMPLE_DIRS)
def test_every_variable_a_rendered_container_of_an_example_fleet_uses_expands(example: str) -> None:
    """Every container and init container of every workload the example fleets render: no
    reference to an undefined or later-defined variable, none that expands to nothing."""
    problems = [f"{cluster}: {obj['kind']} {obj['metadata']['name']} {where}: {p}"  # type: ignore[index]
                for cluster, obj in _workloads(EXAMPLES / example) for where, p in workload_unresolved(obj)]
    assert problems == []


def test_the_dynamo_examples_gang_finds_its_leader() -> None:
    """Acceptance (issue 21): the Dynamo example's pods expand every variable they use, and the
    leader address is built only from entries Kubernetes resolves before it."""
    workloads = [obj for _, obj in _workloads(EXAMPLES / "dynamo") if obj["kind"] == "PodCliqueSet"]
    assert workloads
    for obj in workloads:
        refs = list(pod_templates(obj))
        assert len(refs) == 2 and workload_unresolved(obj) == []
        for ref in refs:
            env = ref.spec["containers"][0]["env"]
            [leader] = [e for e in env if e["name"] == "MODELPLANE_LEADER_ADDRESS"]
            assert not {r for r in references(leader["value"]) if r.startswith("GROVE_")}


GANG_LOAD_FORMAT = """
apiVersion: modelplane.ai/v1alpha1
kind: ModelDeployment
metadata: {name: mx, namespace: ml-team}
spec:
  replicas: 1
  template:
    spec:
      modelCacheRef: {name: qwen}
      engines:
      - name: vllm
        members:
        - role: Standalone
          nodeSelector: {devices: [{name: gpu, count: 1, selectors: [{cel: 'device.driver == "gpu.example.com"'}]}]}
          template:
            spec:
              containers:
              - name: engine
                image: vllm/vllm-openai:v0.26.0
                command: [sh, -c]
                args: ["vllm serve Qwen/Qwen3-0.6B --load-format $(MODELPLANE_LOAD_FORMAT) --trust-remote-code"]
"""


@pytest.mark.parametrize("cluster", ["kind-a", "dynamo-b"])
def test_a_command_may_use_modelplane_load_format_whether_or_not_modelexpress_is_opted_in(cluster: str) -> None:
    """Issue 21 item 2: `--load-format $(MODELPLANE_LOAD_FORMAT)` with the variable unset is left
    as literal text (expand.go), and vLLM's argparse then exits; it is always defined."""
    fl = fleet(CACHES, GANG_LOAD_FORMAT)
    objects = render_replica(fl, fl.deployments[("ml-team", "mx")],
                             place(fl, "ml-team", "mx", cluster, pools={"vllm": ("gpu" if cluster == "kind-a"
                                                                                     else "small",)}), cluster)
    workload = one(objects, "Deployment")
    assert workload_unresolved(workload) == []
    env = {e["name"]: e.get("value") for e in workload["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["MODELPLANE_LOAD_FORMAT"] == "auto"


def test_an_unresolved_reference_in_a_rendered_workload_is_found() -> None:
    """The contract test can fail: a container referring to a variable nobody defines."""
    fl = load_manifest_text((EXAMPLES / "kind" / "platform.yaml").read_text()
                            + "---\n" + (EXAMPLES / "kind" / "models.yaml").read_text()
                            .replace('"--port", "8000"', '"--port", "$(NOBODY_SETS_THIS)"', 1))
    plan = plan_fleet(fl, place_fleet(fl))
    found = [p for c in plan.clusters.values() for o in c.objects() for _, p in workload_unresolved(o)]
    assert found and {p.name for p in found} == {"NOBODY_SETS_THIS"}
