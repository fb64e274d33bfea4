"""The local Kind stack's later `up`s (issue 21 item 11): a changed node image or node count
replaces the kind cluster delete-first, a create after a partial one succeeds, and a recreated
cluster's provider has a new identity so its objects are created again.

kubernetes-sigs/kind pkg/cluster/internal/create/create.go `alreadyExists`: create refuses a name
that still has nodes ("node(s) already exist for a cluster with the name %q");
pkg/cluster/internal/delete/delete.go: delete of a name without nodes lists none and succeeds."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from components.sources.kind import kind_commands

from .harness import Run, run_program

FAKE_KIND = r"""#!/bin/sh
# kind as its sources behave: create refuses a name whose nodes exist, delete of none succeeds.
state="$FAKE_KIND_STATE/$3"
case "$1 $2" in
  "create cluster")
    if [ -e "$state" ]; then
      echo "ERROR: failed to create cluster: node(s) already exist for a cluster with the name \"$3\"" >&2
      exit 1
    fi
    cat > /dev/null; touch "$state"; echo "Creating cluster \"$3\" ..." >&2 ;;
  "delete cluster") rm -f "$state"; echo "Deleting cluster \"$3\" ..." >&2 ;;
  "get kubeconfig") [ -e "$state" ] && echo "apiVersion: v1" ;;
esac
"""


def _run_create(tmp_path: Path, script: str) -> subprocess.CompletedProcess[str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    kind = bin_dir / "kind"
    kind.write_text(FAKE_KIND)
    kind.chmod(0o755)
    state = tmp_path / "state"
    state.mkdir(exist_ok=True)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "FAKE_KIND_STATE": str(state)}
    return subprocess.run(["/bin/sh", "-c", script], input="kind: Cluster\n", capture_output=True, text=True,
                          env=env, timeout=30, check=False)


def test_kind_create_succeeds_after_a_partial_create_left_nodes_behind(tmp_path: Path) -> None:
    create, _ = kind_commands("eu-west", "kindest/node:v1.36.1")
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "eu-west").touch()            # a create that died after provisioning nodes
    retried = _run_create(tmp_path, create)
    assert retried.returncode == 0, retried.stderr
    assert retried.stdout.startswith("apiVersion: v1")
    # without the delete first, kind refuses exactly as the issue saw
    bare = create.split(" >&2 && ", 1)[1]
    refused = _run_create(tmp_path, bare)
    assert refused.returncode != 0 and "already exist" in refused.stderr


def _commands(run: Run) -> dict[str, object]:
    return {r.name: r for r in run.of_type("command:local:Command")}


def _kind(tmp_path: Path, nodes: int) -> Path:
    text = (Path("examples/kind/platform.yaml").read_text()
            .replace("nodeCount: 1", f"nodeCount: {nodes}", 1))
    fleet = tmp_path / f"fleet-{nodes}"
    fleet.mkdir()
    (fleet / "platform.yaml").write_text(text)
    (fleet / "models.yaml").write_text(Path("examples/kind/models.yaml").read_text())
    return fleet


def test_a_changed_kind_cluster_is_replaced_delete_first_and_its_provider_gets_a_new_identity(tmp_path: Path) -> None:
    """Pulumi `deleteBeforeReplace` on the kind command (the old cluster holds the name), and the
    Kubernetes provider's `clusterIdentifier` (pulumi-kubernetes: a changed identifier replaces the
    provider's resources) follows the command's trigger, so objects come back on the new cluster."""
    one = run_program("kind", config={"manifests": str(_kind(tmp_path, 1))})
    two = run_program("kind", config={"manifests": str(_kind(tmp_path, 2))})
    ids = []
    for run in (one, two):
        command = _commands(run)["eu-west-kind"]
        assert command.delete_before_replace is True                      # type: ignore[attr-defined]
        provider = run.named("eu-west-k8s", "pulumi:providers:kubernetes").inputs
        trigger = command.inputs["triggers"][0]                          # type: ignore[attr-defined]
        assert provider["clusterIdentifier"] == f"eu-west@kind-{trigger[:12]}"
        ids.append(provider["clusterIdentifier"])
    assert ids[0] != ids[1]
    # the other region did not change: same identity, nothing of it is recreated
    assert (one.named("us-east-k8s", "pulumi:providers:kubernetes").inputs["clusterIdentifier"]
            == two.named("us-east-k8s", "pulumi:providers:kubernetes").inputs["clusterIdentifier"])


def test_engine_workloads_are_awaited_for_their_rendered_budget_not_sixty_minutes() -> None:
    """pulumi/pulumi-kubernetes#672: a `customTimeouts` resource option takes precedence over the
    `pulumi.com/timeoutSeconds` annotation, so the program sets none and the rendered budget
    (modelplane.render.readiness) is what the provider waits (issue 21 item 12)."""
    run = run_program("kind", config={"manifests": "examples/kind"})
    deployments = run.of_type("kubernetes:apps/v1:Deployment")
    engines = [r for r in deployments if "modelplane.ai/engine" in r.inputs["metadata"].get("labels", {})]
    assert engines
    for reg in engines:
        assert reg.custom_timeouts == {}, reg.name
        assert int(reg.inputs["metadata"]["annotations"]["pulumi.com/timeoutSeconds"]) < 3600
    for reg in run.of_type("kubernetes:batch/v1:Job"):
        assert reg.custom_timeouts == {}, reg.name


FAKE_DOCKER = """#!/bin/sh
case "$1" in
  ps) echo abc123; echo def456 ;;
  inspect) echo "/eu-west-control-plane 2026-11-30T10:00:00.123456789Z 2026-11-30T10:00:04.5Z"
           echo "/eu-west-worker 2026-11-30T10:00:00.2Z %s" ;;
esac
"""


def _with_docker(tmp_path: Path, worker_started: str, monkeypatch: object) -> None:
    docker = tmp_path / "docker"
    docker.write_text(FAKE_DOCKER % worker_started)
    docker.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")  # type: ignore[attr-defined]


def test_a_restarted_kind_node_is_said_loudly_with_the_stale_cdi_fix(tmp_path: Path, monkeypatch) -> None:
    """kubernetes-sigs/kind pkg/cluster/internal/providers/docker/provision.go mounts `--tmpfs /run`
    in every node, and dra-example-driver 0.4.0 (latest; HEAD unchanged) writes CDI specs to
    /var/run/cdi (deployments/helm/dra-example-driver/templates/kubeletplugin.yaml) and restores
    prepared claims without writing them again (cmd/dra-example-kubeletplugin/state.go Prepare):
    after a restart its pods stick in CreateContainerError. The preview says so, with the fix."""
    from components.sources.kind import restart_warning

    _with_docker(tmp_path, "2026-12-01T08:30:00.000000001Z", monkeypatch)
    warning = restart_warning("eu-west")
    assert warning is not None and "eu-west-worker" in warning and "eu-west-control-plane" not in warning
    assert "CreateContainerError" in warning and "kubectl --context kind-eu-west delete pod" in warning
    _with_docker(tmp_path, "2026-11-30T10:00:05Z", monkeypatch)      # started right after its creation
    assert restart_warning("eu-west") is None
    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))
    assert restart_warning("eu-west") is None                         # no Docker: nothing to say
