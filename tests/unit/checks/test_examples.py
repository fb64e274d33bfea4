"""The shipped examples against the pack: the local default is clean, and the
silent-failures scenario trips every mandatory manifest policy."""

from pathlib import Path

from modelplane.api import load_manifests
from modelplane.checks import MANDATORY, run_checks

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def test_local_default_fleet_passes_every_mandatory_check():
    findings = run_checks(load_manifests(EXAMPLES / "kind"))
    assert [str(f) for f in findings if f.level == MANDATORY] == []


def test_silent_failures_example_fails_loudly():
    findings = run_checks(load_manifests(EXAMPLES / "silent-failures"))
    assert sorted({f.policy for f in findings}) == [
        "cache-revision-match", "fabric", "kind-node-image", "pool-label-on-existing-clusters",
        "prefill-decode-needs-nixl", "replicas-fully-scheduled", "secrets", "usable-gpu-memory",
    ]
    assert all(f.level == MANDATORY for f in findings)
