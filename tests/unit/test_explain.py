"""`modelplane explain DEPLOYMENT` (issue 32, item 6): per cluster and pool, the selector clause that
refuses a device and what the class says, the taints, the clusterSelector, capacity, and the fix;
never in disagreement with the scheduler's own verdict."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from modelplane.api import load_manifest_text, load_manifests
from modelplane.cel import DeviceView
from modelplane.cel.clauses import conjuncts, explain_selector
from modelplane.explain import UnknownDeployment, explain_deployment, find_deployment, format_explanation
from modelplane.scheduler import place_fleet

REPO = Path(__file__).resolve().parents[2]
KIND = REPO / "examples" / "kind"
CLI = REPO / ".venv" / "bin" / "modelplane"
MEMORY = 'device.capacity["gpu.example.com"].memory.compareTo(quantity("20Gi")) >= 0'
H100 = 'device.attributes["gpu.example.com"].model == "H100"'


def kind_text(models_old: str = "", models_new: str = "", platform_old: str = "", platform_new: str = "") -> str:
    models = (KIND / "models.yaml").read_text()
    platform = (KIND / "platform.yaml").read_text()
    if models_old:
        assert models_old in models
        models = models.replace(models_old, models_new, 1)
    if platform_old:
        assert platform_old in platform
        platform = platform.replace(platform_old, platform_new, 1)
    return platform + "\n---\n" + models


def explain(text: str, name: str = "chat"):
    fleet = load_manifest_text(text, "fleet.yaml")
    return explain_deployment(fleet, place_fleet(fleet), find_deployment(fleet, name))


def facts(e, cluster: str, pool: str | None = None):
    c = next(c for c in e.clusters if c.cluster == cluster)
    return c.facts if pool is None else next(p for p in c.pools if p.pool == pool).facts


def failing(found) -> list:
    return [f for f in found if not f.ok]


H100_CLASS = """
apiVersion: modelplane.ai/v1alpha1
kind: InferenceClass
metadata: {name: real-h100}
spec:
  devices:
  - name: gpu
    claim: DRA
    driver: gpu.example.com
    deviceClassName: gpu.example.com
    count: 1
    attributes: {model: {string: H100}}
    capacity: {memory: {value: 80Gi}}
"""


def test_the_refusing_clause_and_the_class_value_are_named():
    e = explain(kind_text(f"- cel: {MEMORY}\n", f"- cel: {MEMORY} && {H100}\n"))
    (f,) = failing(facts(e, "eu-west", "gpu"))
    assert f.check == "device"
    assert f.detail == ("engine mock member 0 (Standalone) request 'gpu': device gpu: "
                        f"`{H100}` is false: the class says attributes gpu.example.com/model = LATEST-GPU-MODEL")
    assert f.fix.startswith("no pool of the fleet satisfies the request")
    cluster = next(c for c in e.clusters if c.cluster == "eu-west")
    assert cluster.code == "NoPoolFits" and "matched no device" in cluster.reason   # the scheduler's words too


def test_the_fix_names_a_pool_whose_class_satisfies_the_request():
    text = kind_text(f"- cel: {MEMORY}\n", f"- cel: {H100}\n", "className: fake-gpu\n    nodeCount: 1\n---",
                     "className: fake-gpu\n    nodeCount: 1\n---") + "\n---\n" + H100_CLASS
    text = text.replace("  nodePools:\n  - name: gpu\n    className: fake-gpu\n    nodeCount: 1\n---\napiVersion: "
                        "modelplane.ai/v1alpha1\nkind: InferenceGateway",
                        "  nodePools:\n  - name: gpu\n    className: real-h100\n    nodeCount: 1\n---\napiVersion: "
                        "modelplane.ai/v1alpha1\nkind: InferenceGateway")
    e = explain(text)
    assert e.placed == 1 and next(c for c in e.clusters if c.cluster == "us-east").placed
    (f,) = failing(facts(e, "eu-west", "gpu"))
    assert "these pools' classes satisfy the request: us-east/gpu (class real-h100)" in f.fix


@pytest.mark.parametrize(("old", "new", "cluster_check", "fix"), [
    pytest.param("  name: chat\n  namespace: ml-team\nspec:\n  replicas: 1\n  template:\n    spec:\n",
                 "  name: chat\n  namespace: ml-team\nspec:\n  replicas: 1\n  template:\n    spec:\n"
                 "      clusterSelector: {matchLabels: {modelplane.ai/region: eu-wset}}\n",
                 "clusterSelector", "did you mean 'eu-west'?", id="clusterSelector-typo"),
])
def test_cluster_facts_say_what_refuses_and_the_fix(old, new, cluster_check, fix):
    e = explain(kind_text(old, new))
    for cluster in ("eu-west", "us-east"):
        (f,) = failing(facts(e, cluster))
        assert f.check == cluster_check and fix in f.fix


def test_an_untolerated_taint_and_its_toleration():
    platform_old = "  name: us-east\n  labels:\n    modelplane.ai/region: us-east\nspec:\n"
    e = explain(kind_text(platform_old=platform_old,
                          platform_new=platform_old + "  taints: [{key: maint, effect: NoSchedule}]\n"), "chat-canary")
    (f,) = failing(facts(e, "us-east"))
    assert f.check == "taints" and f.detail == "taint maint:NoSchedule is not tolerated"
    assert "add a toleration {key: maint, operator: Exists, effect: NoSchedule}" in f.fix


def test_a_pool_that_matches_but_is_full_is_a_capacity_fact():
    e = explain(kind_text("      - name: mock\n", "      - name: mock\n        copies: 2\n"))
    assert e.placed == 0
    for cluster in ("eu-west", "us-east"):
        (f,) = failing(facts(e, cluster, "gpu"))
        assert f.check == "capacity" and "short by 1 device in pool gpu" in f.detail


def test_too_many_devices_per_pod_says_how_many_the_class_has():
    e = explain(kind_text("              count: 1\n", "              count: 2\n"))
    (f,) = failing(facts(e, "eu-west", "gpu"))
    assert "the class has 1 per node and the request asks for 2" in f.detail
    assert f.fix.startswith("ask for at most 1 per pod")


EXAMPLES = sorted(p.name for p in (REPO / "examples").iterdir() if p.is_dir())


@pytest.mark.parametrize("example", EXAMPLES)
def test_explain_agrees_with_the_scheduler_on_every_example(example):
    """A cluster the scheduler placed a replica on has that replica's pools matching; a cluster
    refused with NoPoolFits has no pool matching; a pool that does not match says which request
    fails, one that matches has no failing device fact."""
    fleet = load_manifests(REPO / "examples" / example)
    placement = place_fleet(fleet)
    for key in fleet.deployments:
        e = explain_deployment(fleet, placement, key)
        placed = placement.find(*key)
        assert placed is not None
        for c in e.clusters:
            pools = {p.pool: p for p in c.pools}
            members = {e.name: len(e.members) for e in fleet.deployments[key].engines}
            for r in (r for r in placed.replicas if r.cluster == c.cluster):
                for name, engine in r.engines.items():
                    for m, pool in enumerate(engine.pools_for(members[name])):
                        assert f"{name}[{m}]" in pools[pool].matching, (key, c.cluster, name, m, pool)
            if c.code == "NoPoolFits":
                assert not any(p.fits for p in c.pools), (key, c.cluster)
            for p in c.pools:
                device_failures = [f for f in p.facts if f.check == "device" and not f.ok]
                assert bool(device_failures) == (not p.fits), (key, c.cluster, p.pool)
        text = format_explanation(e)
        assert text.startswith(f"{key[0]}/{key[1]}: ")
        json.dumps(e.to_json())


def test_names_resolve_like_kubectl():
    fleet = load_manifests(KIND)
    assert find_deployment(fleet, "chat") == ("ml-team", "chat")
    assert find_deployment(fleet, "ml-team/chat-canary") == ("ml-team", "chat-canary")
    with pytest.raises(UnknownDeployment, match="did you mean 'chat-canary'"):
        find_deployment(fleet, "chat-canry")
    two = load_manifest_text(kind_text("  name: chat-canary\n  namespace: ml-team", "  name: chat\n  namespace: other"))
    with pytest.raises(UnknownDeployment, match="names ModelDeployments in 2 namespaces"):
        find_deployment(two, "chat")


# -- selector clauses ---------------------------------------------------------------------------

DEVICE = DeviceView.from_spec("gpu.example.com", {"model": {"string": "LATEST-GPU-MODEL"}},
                              {"memory": {"value": "80Gi"}})


@pytest.mark.parametrize(("expression", "clauses"), [
    pytest.param("a && b && c", ("a", "b", "c"), id="three"),
    pytest.param("a && (b && c) || d", ("a && (b && c) || d",), id="an-or-is-one-clause"),
    pytest.param("a && (b || c)", ("a", "(b || c)"), id="parenthesised"),
    pytest.param("x ? a && b : c", ("x ? a && b : c",), id="ternary"),
    pytest.param("cel.bind(m, 1, m > 0) && true", ("cel.bind(m, 1, m > 0) && true",), id="a-macro-stays-whole"),
    pytest.param("a &&", ("a &&",), id="does-not-parse"),
])
def test_conjuncts(expression, clauses):
    assert conjuncts(expression) == clauses


@pytest.mark.parametrize(("expression", "said"), [
    pytest.param(f"{MEMORY} && {H100}",
                 f"`{H100}` is false: the class says attributes gpu.example.com/model = LATEST-GPU-MODEL", id="false"),
    pytest.param('device.attributes["gpu.example.com"].productName == "x"',
                 "errors (no such key: productName): the class says attributes gpu.example.com/productName = "
                 "not declared", id="missing-key"),
    pytest.param(MEMORY, f"`{MEMORY}` holds", id="holds"),
    pytest.param('device.capacity["gpu.example.com"].memory.compareTo(quantity("81Gi")) >= 0',
                 "is false: the class says capacity gpu.example.com/memory = 80Gi", id="capacity"),
])
def test_explain_selector(expression, said):
    assert said in explain_selector(expression, DEVICE).describe()


# -- as a user runs it --------------------------------------------------------------------------

def _cli(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(CLI), *argv], cwd=REPO, capture_output=True, text=True, timeout=120)


def test_cli_explain_text_json_and_errors():
    text = _cli("explain", "examples/policy-feasibility", "pinned")
    assert text.returncode == 0, text.stderr
    assert "cluster maint: refused: untolerated taint maint:NoSchedule [UntoleratedTaint]" in text.stdout
    assert "fix: add a toleration {key: maint, operator: Exists, effect: NoSchedule}" in text.stdout
    doc = json.loads(_cli("explain", "examples/policy-feasibility", "ml-team/pinned", "-o", "json").stdout)
    maint = next(c for c in doc["clusters"] if c["cluster"] == "maint")
    assert maint["refusal"] == {"code": "UntoleratedTaint", "plugin": "taints",
                                "message": "untolerated taint maint:NoSchedule", "kind": "policy"}
    unknown = _cli("explain", "examples/kind", "chta")
    assert unknown.returncode == 2 and "did you mean 'chat'?" in unknown.stderr and unknown.stdout == ""


def test_a_pool_whose_pcie_roots_cannot_hold_the_aligned_claim_is_explained_as_the_scheduler_refuses_it():
    """Device fit refuses a class whose instance type cannot hold a member's GPUs and dra.net EFAs
    aligned by PCIe root (plugins/device_fit/alignment.py; g6e.48xlarge: no GPU shares a root with
    an EFA): explain agrees, naming the roots and the fix, and the p5en pool still matches (its 4
    nodes hold 4 of the 5 replicas: the fifth is refused by both clusters)."""
    from tests.unit.scheduler.test_pcie_alignment import cluster, deployment, dra_efa_class

    fleet = load_manifest_text("---".join([
        dra_efa_class("p5en", "p5en.48xlarge", 8, 16), dra_efa_class("g6e", "g6e.48xlarge", 8, 4),
        cluster("eks-p5en", "p5en"), cluster("eks-g6e", "g6e"), deployment(8, 4, replicas=5)]))
    placement = place_fleet(fleet)
    e = explain_deployment(fleet, placement, find_deployment(fleet, "m"))
    by_cluster = {c.cluster: c for c in e.clusters}
    g6e = by_cluster["eks-g6e"]
    assert (g6e.code, g6e.kind) == ("NoPoolFits", "never")          # the scheduler's refusal
    (pool,) = g6e.pools
    assert not pool.fits and not pool.matching
    (fact,) = [f for f in pool.facts if not f.ok]
    assert fact.check == "device"
    assert "request 'gpu' cannot be aligned with request 'efa' on class g6e" in fact.detail
    assert "g6e.48xlarge no GPU shares a PCIe root with an EFA" in fact.detail
    assert fact.fix.startswith("claim the EFAs through the EFA device plugin")
    (p5en,) = by_cluster["eks-p5en"].pools
    assert p5en.fits and p5en.matching == ("main[0]",)
