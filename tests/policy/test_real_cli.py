"""`pulumi preview --policy-pack policy-packs/modelplane` with the real Pulumi CLI built by
scripts/bootstrap-tools. A throwaway program in a temp dir registers only the placement
resource (the real dynamic provider), so no Kubernetes provider is needed. Skipped loudly
when the tools are not built; MODELPLANE_REQUIRE_ENGINE=1 turns the skip into a failure."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACK = REPO / "policy-packs" / "modelplane"
TOOLS = ("pulumi", "pulumi-language-python", "pulumi-language-python-exec", "pulumi-resource-pulumi-python")

PROGRAM = '''
import json, os, sys
sys.path.insert(0, {repo!r})
from modelplane.api import load_manifests
from providers.placement import FleetPlacementArgs, FleetPlacementResource

example = os.environ["MP_EXAMPLE"]
observed_file = os.path.join(example, "observed.json")
observed = json.load(open(observed_file)) if os.path.exists(observed_file) else None
FleetPlacementResource("placement", FleetPlacementArgs(fleet_documents=load_manifests(example).to_documents(),
                                                     accounting="Device", observed=observed))
'''

pytestmark = pytest.mark.engine


def _bin_dir() -> Path:
    out = subprocess.run([sys.executable, str(REPO / "scripts" / "bootstrap-tools"), "--print-bin-dir"],
                         capture_output=True, text=True, cwd=REPO)
    return Path(out.stdout.strip())


@pytest.fixture(scope="module")
def preview(tmp_path_factory):
    bin_dir = _bin_dir()
    missing = [t for t in TOOLS if not (bin_dir / t).exists()]
    if missing:
        reason = (f"REAL PULUMI ENGINE NOT AVAILABLE, pack CLI test NOT RUN: {', '.join(missing)} not built in "
                  f"{bin_dir}; run scripts/bootstrap-tools")
        if os.environ.get("MODELPLANE_REQUIRE_ENGINE"):
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason)
    work = tmp_path_factory.mktemp("pack-cli")
    (work / "Pulumi.yaml").write_text(
        f"name: pack-cli\nruntime:\n  name: python\n  options:\n    virtualenv: {REPO / '.venv'}\n")
    (work / "__main__.py").write_text(PROGRAM.format(repo=str(REPO)))
    (work / "state").mkdir()
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "PULUMI_HOME": str(work / "home"),
           "PULUMI_CONFIG_PASSPHRASE": "pack-cli", "PULUMI_SKIP_UPDATE_CHECK": "true",
           "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true", "PULUMI_DISABLE_REGISTRY_RESOLVE": "true",
           "PULUMI_BACKEND_URL": f"file://{work / 'state'}",
           "PULUMI_PYTHON_CMD": str(REPO / ".venv" / "bin" / "python")}

    def pulumi(*args: str, example: str = "kind") -> subprocess.CompletedProcess:
        return subprocess.run(["pulumi", *args, "--non-interactive"], cwd=work, capture_output=True, text=True,
                              timeout=300, env={**env, "MP_EXAMPLE": str(REPO / "examples" / example)})

    assert pulumi("stack", "init", "dev").returncode == 0
    # The language host of this build fails on a stack with no config at all.
    assert pulumi("config", "set", "pack-cli:unused", "x").returncode == 0

    def run(example: str, *extra: str) -> subprocess.CompletedProcess:
        return pulumi("preview", "--policy-pack", str(PACK), *extra, example=example)

    return run


def test_silent_failures_fail_the_preview_with_each_violation(preview):
    result = preview("silent-failures")
    assert result.returncode != 0
    out = result.stdout
    assert "❌ modelplane@v0.1.0" in out
    for policy in ("usable-gpu-memory", "published-device-attributes", "cache-revision-match",
                   "prefill-decode-needs-nixl", "fabric", "replicas-fully-scheduled",
                   "pool-label-on-existing-clusters", "kind-node-image", "secrets"):
        assert f"- [mandatory]  {policy}  (pulumi-python:dynamic/modelplane:FleetPlacement: placement)" in out
    for policy in ("declared-capacity", "fabric-multi-node-tcp"):
        assert f"- [advisory]  {policy}  (pulumi-python:dynamic/modelplane:FleetPlacement: placement)" in out
    assert ("InferenceClass/h100 (placement.fleet#0) spec.devices[0].capacity.memory: declares 80Gi for an "
            "NVIDIA H100 80GB, but the gpu.nvidia.com driver publishes only 81559Mi") in out


def test_policy_pack_config_changes_levels(preview):
    result = preview("silent-failures", "--policy-pack-config", str(PACK / "policy-config.example.json"))
    out = result.stdout
    assert "- [mandatory]  declared-capacity  " in out
    assert "kind-node-image" not in out
