"""A stalled or killed API server costs the placement provider's check() its read bound and
nothing more, on real (simulated) control planes. Its own module: it starts examples/kind, which
beside test_observe.py's module fleet made six API servers at once, the run's memory peak
(docs/ci.md#memory)."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from modelplane.api import load_manifests
from providers.placement import compute_placement
from sim import SimFleet

from .conftest import REPO

pytestmark = pytest.mark.sim


def test_a_stalled_or_killed_api_server_costs_preview_its_bound_and_nothing_more(
        start_fleet: Callable[..., tuple[SimFleet, dict[str, Path]]], tmp_path: Path) -> None:
    """SIGSTOP one cluster's kube-apiserver (it accepts, never answers): the provider's check()
    returns within the read bound and calls the cluster unreachable; SIGKILL: the same, at once."""
    sim, kubeconfigs = start_fleet("examples/kind")
    record = json.loads(sim.state_file.read_text())
    apiserver = next(p for p in record["clusters"]["eu-west"]["processes"] if p["name"] == "kube-apiserver")
    fleet = load_manifests(REPO / "examples" / "kind")
    news = {"fleet": fleet.to_documents(), "accounting": "Device",
            "observe": {"kubeconfigs": {c: str(p) for c, p in kubeconfigs.items()}, "timeoutSeconds": 2}}
    os.kill(apiserver["pid"], signal.SIGSTOP)
    try:
        start = time.monotonic()
        outputs, failures = compute_placement({}, news, 1000.0)
        took = time.monotonic() - start
    finally:
        os.kill(apiserver["pid"], signal.SIGCONT)
    assert not failures and outputs is not None
    assert took < 2 + 2.5, took
    assert outputs["health"]["eu-west"]["condition"] == "Unreachable"
    assert outputs["capacity"]["eu-west"]["source"] == "declared"
    assert outputs["capacity"]["us-east"]["source"] == "observed"
    os.kill(apiserver["pid"], signal.SIGKILL)
    start = time.monotonic()
    outputs, failures = compute_placement({}, news, 1000.0)
    assert time.monotonic() - start < 2 + 2.5
    assert outputs is not None and outputs["health"]["eu-west"]["condition"] == "Unreachable"
