"""References that resolve to nothing are loud, with the nearest match (issue 32, items 1-2):
ModelService selectors, FleetBudget scopes, observed pool sizes, and every name the loader checks."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from modelplane.api import ManifestError, load_manifest_text
from modelplane.checks import MANDATORY, run_checks
from modelplane.references import observed_problems, reference_warnings
from modelplane.suggest import did_you_mean, nearest

REPO = Path(__file__).resolve().parents[3]
KIND = REPO / "examples" / "kind"
CLI = REPO / ".venv" / "bin" / "modelplane"


def kind_fleet(*, models: str | None = None, platform: str | None = None, extra: str = "") -> str:
    texts = [platform if platform is not None else (KIND / "platform.yaml").read_text(),
             models if models is not None else (KIND / "models.yaml").read_text()]
    return "\n---\n".join([*texts, extra] if extra else texts)


def kind_models(old: str, new: str) -> str:
    text = (KIND / "models.yaml").read_text()
    assert old in text
    return text.replace(old, new)


def policy_findings(text: str, policy: str, observed=None) -> list:
    fleet = load_manifest_text(text, "fleet.yaml")
    return [f for f in run_checks(fleet, observed=observed) if f.policy == policy]


ENDPOINT = """
apiVersion: modelplane.ai/v1alpha1
kind: ModelEndpoint
metadata:
  name: together
  namespace: ml-team
  labels: {provider: together}
spec:
  url: https://api.together.xyz/v1
"""


@pytest.mark.parametrize(("old", "new", "extra", "hint"), [
    pytest.param("deployment: chat-canary", "deployment: chat-canry", "", "Did you mean 'chat-canary'?",
                 id="deployment-name-typo"),
    pytest.param("modelplane.ai/deployment: chat-canary", "modelplane.ai/deploymnet: chat-canary", "",
                 "Did you mean 'modelplane.ai/deployment'?", id="label-key-typo"),
    pytest.param("modelplane.ai/deployment: chat-canary", "modelplane.ai/cluster: eu-wset", "",
                 "Did you mean 'eu-west'?", id="cluster-typo"),
    pytest.param("modelplane.ai/deployment: chat-canary", "provider: togther", ENDPOINT,
                 "Did you mean 'together'?", id="endpoint-label-typo"),
])
def test_service_selector_matching_nothing_is_mandatory_and_names_the_nearest(old, new, extra, hint):
    found = policy_findings(kind_fleet(models=kind_models(old, new), extra=extra), "service-selector")
    assert len(found) == 1
    f = found[0]
    assert f.level == MANDATORY
    assert f.resource == "ModelService/ml-team/chat (fleet.yaml#6)"
    assert f.field == "spec.endpoints[1].selector.matchLabels"
    assert hint in f.message
    assert "takes no traffic" in f.message and "weight 10 of 100" in f.message


@pytest.mark.parametrize(("old", "new", "extra"), [
    pytest.param("x", "x", "", id="the-example-as-it-is"),
    pytest.param("modelplane.ai/deployment: chat-canary", "modelplane.ai/cluster: us-east", "", id="by-cluster"),
    pytest.param("modelplane.ai/deployment: chat-canary", "modelplane.ai/replica-index: '0'", "", id="by-index"),
    pytest.param("modelplane.ai/deployment: chat-canary", "provider: together", ENDPOINT, id="a-saas-endpoint"),
    pytest.param("  name: chat-canary\n  namespace: ml-team\nspec:\n  replicas: 1\n  template:\n    spec:",
                 "  name: chat-canary\n  namespace: ml-team\nspec:\n  replicas: 0\n  template:\n"
                 "    metadata: {labels: {track: canary}}\n    spec:", "", id="a-parked-deployment-by-template-label"),
])
def test_selectors_that_match_something_are_quiet(old, new, extra):
    models = kind_models(old, new)
    if "track: canary" in models:
        models = models.replace("modelplane.ai/deployment: chat-canary", "track: canary")
    assert policy_findings(kind_fleet(models=models, extra=extra), "service-selector") == []


def test_a_selector_matching_only_another_namespace_says_so():
    models = kind_models("  name: chat-canary\n  namespace: ml-team", "  name: chat-canary\n  namespace: other")
    (f,) = policy_findings(kind_fleet(models=models), "service-selector")
    assert "other/chat-canary would match, but a ModelService routes only within its own namespace" in f.message


BUDGET = """
apiVersion: placement.modelplane-pulumi.dev/v1alpha1
kind: FleetBudget
metadata:
  name: ml
spec:
  maxDevices: 1
  %s
"""


@pytest.mark.parametrize(("scope", "field", "hint"), [
    pytest.param("namespaces: [ml-taem]", "spec.namespaces[0]", "did you mean 'ml-team'?", id="namespace-typo"),
    pytest.param("deploymentSelector: {matchLabels: {modelplane.ai/tier: gold}}",
                 "spec.deploymentSelector.matchLabels", "none has the label modelplane.ai/tier", id="selector"),
])
def test_a_budget_selecting_nothing_is_mandatory(scope, field, hint):
    (f,) = policy_findings(kind_fleet(extra=BUDGET % scope), "budget-scope")
    assert f.level == MANDATORY and f.field == field and hint in f.message
    assert "limits nothing" in f.message or "counts nothing" in f.message


def test_a_budget_in_scope_is_quiet():
    assert policy_findings(kind_fleet(extra=BUDGET % "namespaces: [ml-team]"), "budget-scope") == []


def test_observed_names_of_the_fleet_only():
    fleet = load_manifest_text(kind_fleet(), "fleet.yaml")
    assert observed_problems({"eu-west": {"gpu": 1}}, fleet) == []
    assert observed_problems({"eu-wset": {"gpu": 1}, "us-east": {"gpus": 2}}, fleet) == [
        "cluster 'eu-wset' is not an InferenceCluster of the fleet (known: eu-west, us-east); did you mean 'eu-west'?",
        "us-east.gpus: cluster us-east has no node pool 'gpus' (its pools: gpu); did you mean 'gpu'?",
    ]
    (f,) = policy_findings(kind_fleet(), "observed-names", observed={"eu-wset": {"gpu": 1}})
    assert f.level == MANDATORY and "never read" in f.message


@pytest.mark.parametrize(("old", "new", "expected"), [
    pytest.param("className: fake-gpu\n    nodeCount: 1\n---", "className: fake-gpuu\n    nodeCount: 1\n---",
                 "InferenceClass 'fake-gpuu' does not exist (known: fake-gpu); did you mean 'fake-gpu'?",
                 id="className"),
    pytest.param("  backend: Traefik", "  clusterName: eu-wset\n  backend: Traefik",
                 "InferenceCluster 'eu-wset' does not exist (known: eu-west, us-east); did you mean 'eu-west'?",
                 id="gateway-clusterName"),
])
def test_loader_references_name_the_nearest(old, new, expected):
    platform = (KIND / "platform.yaml").read_text()
    assert old in platform
    with pytest.raises(ManifestError) as err:
        load_manifest_text(kind_fleet(platform=platform.replace(old, new, 1)), "fleet.yaml")
    assert expected in str(err.value)


def test_loader_cache_and_autoscaler_references_name_the_nearest():
    models = kind_models("      engines:\n", "      modelCacheRef: {name: qwen}\n      engines:\n")
    cache = ("apiVersion: modelplane.ai/v1alpha1\nkind: ModelCache\nmetadata: {name: qwen3, namespace: ml-team}\n"
             "spec: {source: HuggingFace, huggingFace: {repo: Qwen/Qwen3-0.6B, sizeGiB: 10}}\n")
    scaler = ("apiVersion: placement.modelplane-pulumi.dev/v1alpha1\nkind: ReplicaAutoscaler\n"
              "metadata: {name: chat, namespace: ml-team}\n"
              "spec: {scaleTargetRef: {name: chta}, minReplicas: 1, maxReplicas: 2,\n"
              "       metrics: [{type: QueueDepth, target: {averageValue: 4}}]}\n")
    with pytest.raises(ManifestError) as err:
        load_manifest_text(kind_fleet(models=models, extra=cache + "---\n" + scaler), "fleet.yaml")
    text = str(err.value)
    assert "ModelCache ml-team/qwen does not exist (in namespace ml-team: qwen3); did you mean 'qwen3'?" in text
    assert "did you mean 'chat'?" in text


def test_nearest():
    assert nearest("chat-canry", ["chat", "chat-canary"]) == "chat-canary"
    assert nearest("chat", ["chat", "chat-canary"]) is None          # an exact name needs no hint
    assert nearest("gpu", ["system-pool"]) is None                   # nothing alike
    assert did_you_mean("h10", ["h100"]) == "; did you mean 'h100'?"
    assert did_you_mean("zzz", ["h100"]) == ""


# -- as a user runs them: the installed console script ----------------------------------------

def _cli(*argv: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(CLI), *argv], cwd=cwd, capture_output=True, text=True, timeout=120)


@pytest.fixture
def typo_fleet(tmp_path: Path) -> Path:
    (tmp_path / "platform.yaml").write_text((KIND / "platform.yaml").read_text())
    (tmp_path / "models.yaml").write_text(kind_models("deployment: chat-canary", "deployment: chat-canry"))
    return tmp_path


def test_cli_lint_fails_on_the_typo_and_plan_warns(typo_fleet):
    lint = _cli("lint", str(typo_fleet))
    assert lint.returncode == 1
    assert "service-selector" in lint.stdout and "Did you mean 'chat-canary'?" in lint.stdout
    plan = _cli("plan", str(typo_fleet))
    assert plan.returncode == 0                       # a plan, not a refusal: the warning says it
    assert plan.stderr.startswith("warning: ModelService ml-team/chat (")
    assert "Did you mean 'chat-canary'?" in plan.stderr
    fleet = load_manifest_text(kind_fleet(models=(typo_fleet / "models.yaml").read_text()), "f.yaml")
    assert len(reference_warnings(fleet)) == 1


@pytest.mark.parametrize("command", ["plan", "lint"])
@pytest.mark.parametrize(("observed", "named"), [
    pytest.param({"eu-wset": {"gpu": 1}}, "cluster 'eu-wset' is not an InferenceCluster", id="cluster"),
    pytest.param({"eu-west": {"gpus": 1}}, "eu-west.gpus: cluster eu-west has no node pool 'gpus'", id="pool"),
])
def test_cli_observed_naming_an_unknown_cluster_or_pool_is_an_error(tmp_path, command, observed, named):
    path = tmp_path / "observed.json"
    path.write_text(json.dumps(observed))
    proc = _cli(command, "examples/kind", "--observed", str(path))
    assert proc.returncode == 2, proc.stdout
    assert proc.stderr.startswith("error: ") and named in proc.stderr and "did you mean" in proc.stderr
    assert str(path) in proc.stderr and proc.stdout == ""


def test_a_typo_in_a_priority_of_its_own_sends_its_traffic_to_another_priority():
    models = kind_models("  - name: canary\n    weight: 10\n", "  - name: canary\n    weight: 10\n    priority: 1\n")
    models = models.replace("deployment: chat\n", "deployment: caht\n", 1)
    (f,) = policy_findings(kind_fleet(models=models), "service-selector")
    assert f.field == "spec.endpoints[0].selector.matchLabels"
    assert "priority 0 has nothing to route to, so its traffic goes to another priority" in f.message
    assert "Did you mean 'chat'?" in f.message
