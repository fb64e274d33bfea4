"""The shipped examples against the pack: the local default is clean, and the
silent-failures scenario trips every mandatory manifest policy."""

from pathlib import Path

import pytest

from modelplane.api import load_manifests
from modelplane.checks import MANDATORY, run_checks

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


# The deployable examples (the stacks' manifests and the routing demos). The scheduler-*
# examples show shortfalls and drains on purpose, so they are not expected to pass.
DEPLOYABLE = ["aws", "byo", "canary", "dynamo", "gcp", "kind"]


@pytest.mark.parametrize("example", [e for e in DEPLOYABLE if (EXAMPLES / e).is_dir()])
def test_deployable_examples_pass_every_mandatory_check(example):
    findings = run_checks(load_manifests(EXAMPLES / example))
    assert [str(f) for f in findings if f.level == MANDATORY] == []


def test_silent_failures_example_fails_loudly():
    import json

    observed = json.loads((EXAMPLES / "silent-failures" / "observed.json").read_text())
    findings = run_checks(load_manifests(EXAMPLES / "silent-failures"), observed=observed)
    assert sorted({(f.policy, f.level) for f in findings}) == [
        ("cache-revision-match", "mandatory"), ("declared-capacity", "advisory"),
        ("fabric", "mandatory"), ("fabric-multi-node-tcp", "advisory"), ("kind-node-digest", "advisory"),
        ("kind-node-image", "mandatory"),
        ("pool-label-on-existing-clusters", "mandatory"), ("prefill-decode-needs-nixl", "mandatory"),
        ("published-device-attributes", "mandatory"), ("replicas-fully-scheduled", "mandatory"),
        ("secrets", "mandatory"), ("usable-gpu-memory", "mandatory"),
    ]
