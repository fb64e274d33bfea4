"""Every surface that reads clusters (`plan --observe`, `verify`, the placement provider's
check()) against the hostile API server's modes at once: exit 0 (1 for verify's mismatch),
bounded time and memory, no traceback, no credential and no terminal escape anywhere in what
is printed or stored, each mode read as what it is (an outage only when the server does not
answer), and no mode placing more on its cluster than the class holds."""

from __future__ import annotations

import json
import time
from collections import Counter
from typing import Any

import pytest

from modelplane.scheduler import FleetPlacement
from providers.placement import compute_placement
from tests.hostile.checks import assert_clean, assert_clean_json
from tests.hostile.conftest import (
    EXPECTED,
    GPUS_PER_NODE,
    GPUS_PER_REPLICA,
    NOT_READ,
    OBSERVED,
    UNREACHABLE,
    HostileFleet,
)
from tests.hostile.measure import run_modelplane
from tests.hostile.server import FORGED
from tests.unit.observe.objects import our_pod

pytestmark = pytest.mark.integration

TIMEOUT_S = 2.0
# Generous: the interpreter's start-up and the plan on a loaded 2-core machine, on top of the
# acceptance bound (timeout + 2 s), which benchmarks/observe_hostile.py measures per mode.
STARTUP_MARGIN_S = 15.0
ALL_MODES_PEAK_MB = 400.0          # every mode at once; one mode at a time stays under 200 (the benchmark)


def classify(capacity: dict[str, Any]) -> str:
    if capacity["source"] == "observed":
        return OBSERVED
    return UNREACHABLE if capacity["reason"].startswith("unreachable") else NOT_READ






def replicas_per_cluster(doc: dict[str, Any]) -> Counter[str]:
    return Counter(r["cluster"] for d in doc["deployments"] for r in d["replicas"])


def test_19_hostile_modes_through_plan_observe(hostile: HostileFleet) -> None:
    """`plan --observe --json` and the table against every mode: each cluster reads as expected,
    outages are health records, the 100,000-GPU slice counts 8 (a note), and no cluster gets
    more replicas than one 8-GPU node holds."""
    run = run_modelplane("plan", str(hostile.manifests), "--observe", str(hostile.kubeconfigs),
                         "--observe-timeout", str(TIMEOUT_S), "--json")
    assert run.code == 0, run.stderr[-2000:]
    assert_clean(run.stdout, run.stderr)
    assert run.seconds < TIMEOUT_S + 2 + STARTUP_MARGIN_S, run.seconds
    assert run.peak_mb < ALL_MODES_PEAK_MB, run.peak_mb
    doc = json.loads(run.stdout)
    assert_clean_json(doc)
    assert {c: classify(v) for c, v in doc["capacity"].items()} == EXPECTED
    assert sorted(doc["health"]) == sorted(c for c, e in EXPECTED.items() if e == UNREACHABLE)
    notes = doc["capacity"]["impossible"].get("notes", [])
    assert any("100008" in n and "only 8 count" in n for n in notes), notes
    assert doc["capacity"]["impossible"]["pools"]["gpu"]["devices"] == GPUS_PER_NODE
    most = GPUS_PER_NODE // GPUS_PER_REPLICA
    assert max(replicas_per_cluster(doc).values()) <= most, replicas_per_cluster(doc)
    assert hostile.server.captured == []                 # the redirect was not followed

    table = run_modelplane("plan", str(hostile.manifests), "--observe", str(hostile.kubeconfigs),
                           "--observe-timeout", str(TIMEOUT_S))
    assert table.code == 0, table.stderr[-2000:]
    assert_clean(table.stdout, table.stderr)
    assert FORGED not in table.stdout


def test_19_hostile_modes_through_verify(hostile: HostileFleet, tmp_path: Any) -> None:
    """`verify` (table and --json) against every mode, with a 2 MB pod message holding escapes
    and a forged verdict line: exit 1 (the mismatch), the output bounded and clean."""
    placement = run_modelplane("plan", str(hostile.manifests), "--json")
    assert placement.code == 0, placement.stderr
    doc = json.loads(placement.stdout)
    replica = next(r for d in doc["deployments"] for r in d["replicas"] if r["cluster"] == "podmessage")
    message = ("0/1 nodes are available: \x1b[2J\x1b]0;owned\x07" + "x" * (2 << 20) + f"\n{FORGED}\n")
    hostile.server.objects["podmessage"].pods = [our_pod(
        "default", "chat-pod", "chat", "podmessage", replica["index"], scheduled_message=message)]
    (tmp_path / "placement.json").write_text(placement.stdout)
    try:
        for extra in ([], ["--json"]):
            run = run_modelplane("verify", str(hostile.manifests), "--placement", str(tmp_path / "placement.json"),
                                 "--observe", str(hostile.kubeconfigs), "--timeout", str(TIMEOUT_S), *extra)
            assert run.code == 1, run.stderr[-2000:]
            assert_clean(run.stdout, run.stderr)
            assert len(run.stdout) < 200_000, len(run.stdout)
            lines = run.stdout.splitlines()
            assert not any(line.startswith("OK:") for line in lines)
            if extra:
                report = json.loads(run.stdout)
                assert_clean_json(report)
                assert report["ok"] is False
    finally:
        hostile.server.objects["podmessage"].pods = []


def test_19_hostile_modes_through_check(hostile: HostileFleet) -> None:
    """The placement provider's check() reading every mode: no failure for the fleet (one bad
    cluster never fails the preview), every output clean, the same readings as the CLI."""
    kubeconfigs = {c: str(hostile.kubeconfigs / f"{c}.yaml") for c in hostile.clusters}
    news = {"fleet": hostile.documents, "accounting": "Device",
            "observe": {"kubeconfigs": kubeconfigs, "timeoutSeconds": TIMEOUT_S}}
    start = time.monotonic()
    outputs, failures = compute_placement({}, news, now=1_800_000_000.0)
    took = time.monotonic() - start
    assert failures == [], failures
    assert outputs is not None
    assert_clean_json(outputs)
    assert took < TIMEOUT_S + 2 + 5, took
    assert {c: classify(v) for c, v in outputs["capacity"].items()} == EXPECTED
    most = GPUS_PER_NODE // GPUS_PER_REPLICA
    placed = FleetPlacement.from_json(outputs["placement"])
    per_cluster = Counter(r.cluster for d in placed.deployments for r in d.replicas)
    assert max(per_cluster.values()) <= most, per_cluster
