"""The sim stack's program under mocks (no simulated cluster needed): every cluster reached through
its sim kubeconfig whatever its source, nothing provisioned, the await rule, the refusals and the
config errors. tests/sim/test_stack*.py run the same stack on real API servers."""

from __future__ import annotations

import json
from typing import Any

import pulumi
import pytest

import components.cluster
from components.args import SimArgs
from components.config import sim_args
from components.sim import SKIP_AWAIT, SimCluster, SimUnavailable, await_rule, await_transformation, simulated_cluster
from tests.pulumi.harness import Run, run_program

STARTED = "2026-11-30T12:00:00Z"


@pytest.fixture
def sim_running(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every cluster's sim runs, its kubeconfig at /sim/<cluster>/kubeconfig; records who asked."""
    asked: list[str] = []

    def running(name: str, sim: SimArgs) -> SimCluster:
        asked.append(name)
        return SimCluster(f"{sim.state_dir}/{name}/kubeconfig", STARTED)

    monkeypatch.setattr(components.cluster, "simulated_cluster", running)
    return asked


def sim(manifests: str, **config: Any) -> Run:
    keys = {"endpointApiKeys": {"ml-team/together-key": "sk-test-123"}}  # examples/byo's SaaS endpoint
    return run_program("sim", config={"manifests": manifests, "sim": {"stateDir": "/sim", **config}, **keys})


@pytest.mark.parametrize(("manifests", "clusters"), [
    ("examples/kind", ["control", "eu-west", "us-east"]),
    ("examples/aws", ["aws-us-east", "aws-us-west"]),
    ("examples/gcp", ["gcp-europe-west", "gcp-us-central"]),
    ("examples/byo", ["byo-east", "byo-west", "control"]),
])
def test_every_cluster_whatever_its_source_is_reached_through_its_sim_kubeconfig(
        sim_running: list[str], manifests: str, clusters: list[str]) -> None:
    run = sim(manifests)
    providers = {r.name: r.inputs for r in run.of_type("pulumi:providers:kubernetes")}
    assert sorted(providers) == [f"{c}-k8s" for c in clusters]
    for cluster in clusters:
        inputs = providers[f"{cluster}-k8s"]
        assert inputs["kubeconfig"] == f"/sim/{cluster}/kubeconfig"
        # a restarted sim is a new cluster: its objects are created again
        assert inputs["clusterIdentifier"] == f"{cluster}@sim-{STARTED}"
        assert inputs["deleteUnreachable"] == "true"
        assert json.loads(inputs["kubeClientSettings"])["timeout"] == 60
    assert sorted(set(sim_running)) == clusters
    provisioned = [r.typ for r in run.resources if r.typ.startswith(("aws:", "gcp:", "command:"))]
    assert provisioned == [], "the sim stack provisions nothing"
    assert not [r for r in run.resources if r.typ.startswith("kubernetes:helm")], "no chart on the sim"
    for reg in run.resources:
        if reg.typ.startswith("kubernetes:") and reg.custom:
            assert run.provider_of(reg) in providers, (reg.typ, reg.name)


def test_objects_that_never_become_ready_on_the_sim_are_not_awaited(sim_running: list[str]) -> None:
    """examples/aws: its gateways' LoadBalancer Services, the cache PVC and every workload mounting it
    carry pulumi.com/skipAwait (with a warning per workload); everything else is applied as is."""
    run = sim("examples/aws")
    skipped = {(r.typ.rsplit(":", 1)[-1], r.name) for r in run.resources if r.typ.startswith("kubernetes:")
               and (r.inputs.get("metadata") or {}).get("annotations", {}).get(SKIP_AWAIT) == "true"}
    kinds = sorted({kind for kind, _ in skipped})
    assert kinds == ["Deployment", "Job", "PersistentVolumeClaim", "Service"], skipped
    for kind, name in skipped:
        if kind == "Service":
            assert run.named(name, "kubernetes:core/v1:Service").inputs["spec"]["type"] == "LoadBalancer"
        if kind in ("Deployment", "Job"):
            assert any(f"sim: {kind} {name} is applied but not awaited" in w for w in run.warnings())
    gateways = [r for r in run.of_type("kubernetes:apps/v1:Deployment") if r.name.endswith("gateway")]
    assert gateways and all(SKIP_AWAIT not in (g.inputs["metadata"].get("annotations") or {}) for g in gateways)
    # The data path does not run on the sim: the render stack's gateway URLs, no Service address.
    assert run.outputs["gatewayUrl"].startswith("http://modelplane-gateway.modelplane-system.svc")


@pytest.mark.parametrize(("kind", "props", "waits"), [
    ("Service", {"spec": {"type": "LoadBalancer"}}, False),
    ("Service", {"spec": {"type": "ClusterIP"}}, True),
    ("PersistentVolumeClaim", {"spec": {}}, False),
    ("Deployment", {"spec": {"template": {"spec": {"volumes": [{"name": "c", "persistentVolumeClaim": {
        "claimName": "cache"}}]}}}}, False),
    ("Deployment", {"spec": {"template": {"spec": {"volumes": [{"name": "d", "emptyDir": {}}]}}}}, True),
    ("Job", {"spec": {"template": {"spec": {}}}}, True),
    ("ConfigMap", {"data": {}}, True),
])
def test_await_rule(kind: str, props: dict[str, Any], waits: bool) -> None:
    assert await_rule(kind, props)[0] is waits


def test_awaited_workloads_are_bounded_by_the_sim_timeout() -> None:
    """A pod the kube-scheduler cannot place fails the update after sim.awaitTimeoutSeconds."""
    transform = await_transformation(SimArgs(await_timeout_s=20))
    opts = pulumi.ResourceOptions(custom_timeouts=pulumi.CustomTimeouts(create="60m", update="60m"))
    args = pulumi.ResourceTransformationArgs(None, "kubernetes:apps/v1:Deployment", "d",  # type: ignore[arg-type]
                                             {"metadata": {"name": "d"}, "spec": {}}, opts)
    result = transform(args)
    assert result is not None and result.opts.custom_timeouts is not None
    assert (result.opts.custom_timeouts.create, result.opts.custom_timeouts.update) == ("20s", "20s")
    service = pulumi.ResourceTransformationArgs(None, "kubernetes:core/v1:Service", "s",  # type: ignore[arg-type]
                                                {"metadata": {"name": "s"}, "spec": {"type": "ClusterIP"}}, opts)
    assert transform(service) is None


def test_dynamo_clusters_are_refused_with_the_reason(sim_running: list[str]) -> None:
    with pytest.raises(pulumi.RunError, match=r"fleet\.yaml#\d+: InferenceCluster \S+ runs the Dynamo stack, which "
                                              r"the sim stack cannot rehearse") as err:
        sim("examples/dynamo")
    assert "Grove" in str(err.value) and "KAI" in str(err.value) and "render stack" in str(err.value)


def test_a_cluster_whose_sim_does_not_run_is_a_clean_error_naming_it(tmp_path: Any) -> None:
    """No state at all: the first cluster registered names the command that starts the sim."""
    with pytest.raises(pulumi.RunError) as err:
        run_program("sim", config={"manifests": "examples/kind", "sim": {"stateDir": str(tmp_path / "none")}})
    assert str(err.value) == (
        f"InferenceCluster eu-west (sim stack): no simulated clusters run from {tmp_path / 'none'}; start the "
        f"fleet's simulated clusters with `python -m modelplane sim up examples/kind --state-dir "
        f"{tmp_path / 'none'}`, then run this again")
    with pytest.raises(SimUnavailable, match="no simulated clusters run from"):
        simulated_cluster("eu-west", SimArgs(state_dir=str(tmp_path / "none"), manifests="examples/kind"))


@pytest.mark.parametrize(("block", "error"), [
    ({"stateDir": "/s", "typo": 1}, "stack config sim: unknown key(s) typo; known: stateDir, awaitTimeoutSeconds"),
    ({"awaitTimeoutSeconds": 0}, "stack config sim.awaitTimeoutSeconds must be a positive number of seconds, not 0"),
    ({"awaitTimeoutSeconds": "soon"}, "must be a positive number of seconds, not 'soon'"),
    ("dir", "stack config sim must be an object"),
])
def test_sim_config_errors_name_the_key(block: Any, error: str) -> None:
    with pytest.raises(pulumi.RunError, match=None) as err:
        sim_args(block, "examples/kind")
    assert error in str(err.value)


def test_sim_config_defaults_to_the_cli_state_dir() -> None:
    assert sim_args({}, "m") == SimArgs(state_dir=".modelplane/sim", manifests="m", await_timeout_s=120)
    assert sim_args(None, "m") is None


def test_sim_stack_refuses_charts(sim_running: list[str]) -> None:
    with pytest.raises(pulumi.RunError, match="set `installCharts: false`"):
        run_program("sim", config={"manifests": "examples/kind", "installCharts": True})
