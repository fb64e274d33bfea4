"""Issue 30's autoscaling items through the placement provider's check() (compute_placement with
`observe` and `autoscale`), the engine pods' /metrics served by the hostile API server: one
pod's hostile metrics never fail the check and never decide beyond what an honest or a missing
replica would (the acceptance), and a draining replica whose state is unknown is not released."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from modelplane.api import load_documents
from modelplane.autoscale import decide
from modelplane.autoscale.engines import SERIES_NAMES
from modelplane.autoscale.exposition import ExpositionError, parse
from modelplane.autoscale.history import History
from modelplane.autoscale.pod_metrics import read_metrics
from modelplane.autoscale.scraped import ScrapedMetricsSource, from_pods
from modelplane.autoscale.state import Draining
from providers.placement import compute_placement
from tests.hostile.autoscale_fleet import HONEST, HOSTILE, MODES, NOW, NS, Body, documents, news, serve
from tests.hostile.checks import assert_clean, assert_clean_json
from tests.hostile.conftest import kubeconfig
from tests.hostile.metrics import HOSTILE_BODIES, HOSTILE_MODES, RUNNING, TTFT, WAITING, honest
from tests.hostile.server import HostileServer

pytestmark = pytest.mark.integration

TIMEOUT_S = 2.0
HONEST_PODS = 2


@pytest.fixture(scope="module")
def server() -> Iterator[HostileServer]:
    with HostileServer.running() as s:
        yield s


def one_pass(server: HostileServer, tmp: Path, hostile: Body, olds: dict[str, Any] | None = None,
             **autoscale: Any) -> tuple[dict[str, Any], list[Any]]:
    """check() once: two honest pods (3 waiting each), one pod answering `hostile`."""
    docs = documents(HONEST_PODS, 1)
    placement = serve(server, docs, lambda cluster, i: honest(3, 2, 0.5) if cluster == HONEST else hostile)
    outputs, failures = compute_placement(olds or {"placement": placement.to_json()},
                                          news(server, tmp, docs, TIMEOUT_S, **autoscale), now=NOW)
    return outputs or {}, failures


def decided(outputs: dict[str, Any]) -> int:
    return int(outputs["autoscaling"]["autoscalers"][f"{NS}/chat"]["replicas"])


@pytest.fixture(scope="module")
def baselines(server: HostileServer, tmp_path_factory: pytest.TempPathFactory) -> dict[str, int]:
    """What the pass decides with the third pod honest, and with it missing (HTTP 500)."""
    out = {}
    for name, body in (("honest", honest(3, 2, 0.5)), ("missing", "failing")):
        outputs, failures = one_pass(server, tmp_path_factory.mktemp(name), body)
        assert not failures, failures
        out[name] = decided(outputs)
    assert out["honest"] > 3 and out["missing"] > 3          # both scale up: the honest pods say so
    return out


@pytest.mark.parametrize("mode", [*HOSTILE_BODIES, *HOSTILE_MODES])
def test_30_1_one_pods_hostile_metrics_never_fail_the_check_or_decide_beyond_the_honest_replicas(
        server: HostileServer, tmp_path: Path, baselines: dict[str, int], mode: str) -> None:
    """The acceptance: whatever one pod answers (a TTFT histogram with le="-1" or "-Inf",
    overflowing bounds, NaN, floods, not UTF-8, huge, endless, dripping...), check() has no
    failure (it was "autoscaling failed unexpectedly ... this is a bug" for every cluster), and
    decides as with that replica honest or missing: never more, never a scale-down."""
    outputs, failures = one_pass(server, tmp_path, HOSTILE_BODIES.get(mode, mode))
    assert not failures, failures
    assert_clean_json(outputs)
    assert decided(outputs) in (baselines["honest"], baselines["missing"]), (mode, decided(outputs), baselines)


def test_30_3_a_draining_replica_whose_state_is_unknown_is_not_released_at_drain_seconds(
        server: HostileServer, tmp_path: Path) -> None:
    """Out of the routes for longer than drainSeconds: released when it reads idle, kept while
    its /metrics answers 500 or its pod is not Ready (it used to go: unknown counted as idle),
    and released at drainGraceSeconds whatever it reads."""
    docs = documents(2, 1, ttft=False)

    def run(body: Body, ready: bool, out_for: float) -> list[str]:
        placement = serve(server, docs, lambda cluster, i: body if cluster == HOSTILE else honest(1, 0, 0.1),
                          lambda cluster, i: ready or cluster != HOSTILE)
        doc = placement.to_json()
        dep = doc["deployments"][0]
        leaving = next(r for r in dep["replicas"] if r["cluster"] == HOSTILE)
        dep["replicas"] = [r for r in dep["replicas"] if r is not leaving]
        dep["desired"] = len(dep["replicas"])
        replica = next(r for r in placement.find(NS, "chat").replicas if r.cluster == HOSTILE)
        state = {"autoscalers": {f"{NS}/chat": {"replicas": 2, "history": History.seeded(2, NOW - 1000).to_json()}},
                 "draining": [Draining(NS, "chat", replica, NOW - out_for).to_json()]}
        outputs, failures = compute_placement({"placement": doc, "autoscaling": state},
                                              news(server, tmp_path / "kube", docs, TIMEOUT_S, drainSeconds=60,
                                                   drainGraceSeconds=600), now=NOW)
        assert not failures, failures
        assert decided(outputs) == 2          # 1 waiting per replica, target 1: no change
        return [d["replica"]["name"] for d in outputs["autoscaling"]["draining"]]

    assert run(honest(0, 0, 0.1), True, 61) == []                  # idle: released
    assert run(honest(0, 1, 0.1), True, 61) != []                  # busy: kept
    assert run("failing", True, 61) != []                          # 500: unknown, kept
    assert run(honest(0, 0, 0.1), False, 61) != []                 # not Ready: unknown, kept
    assert run("failing", True, 600) == []                         # the grace: released whatever it reads


LINES = st.sampled_from([
    f"# TYPE {WAITING} gauge", f"{WAITING} 1", f"{WAITING} 1e300", f"{WAITING} -1", f"{WAITING} NaN",
    f'{WAITING}{{model_name="chat"}} 2', f"# TYPE {RUNNING} gauge", f"{RUNNING} 0", f"# TYPE {TTFT} histogram",
    f'{TTFT}_bucket{{le="0.5"}} 3', f'{TTFT}_bucket{{le="-1"}} 3', f'{TTFT}_bucket{{le="+Inf"}} 3',
    f'{TTFT}_bucket{{le="-Inf"}} 9', f'{TTFT}_bucket{{le="1e308"}} 3', f"{TTFT}_count 3", "x 1", "garbage {{{",
    "\x1b[31mred", "# HELP x \x00", ""])


@settings(max_examples=40, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(lines=st.lists(LINES, max_size=30), raw=st.sampled_from([None, b"\xff\xfe", b"\x00" * 100]))
def test_30_1_property_a_pods_generated_metrics_decide_as_missing_unless_they_parse(
        server: HostileServer, tmp_path: Path, lines: list[str], raw: bytes | None) -> None:
    """Read through the API server's pod proxy: whatever the third pod answers, the reading
    never raises and its reasons are clean; an answer whose engine series do not parse decides
    exactly as a missing replica."""
    docs = documents(HONEST_PODS, 1)
    body = raw if raw is not None else "\n".join(lines).encode()
    fleet = load_documents(docs)
    scaler = fleet.autoscalers[(NS, "chat")]
    configs = {c: kubeconfig(tmp_path / f"{c}.yaml", server.url(mode)) for c, mode in MODES.items()}

    def decision(answer: Body) -> Any:
        placement = serve(server, docs, lambda cluster, i: honest(3, 2, 0.5) if cluster == HONEST else answer)
        readings = read_metrics(configs, {(NS, "chat")}, TIMEOUT_S)
        replicas, failed = from_pods(placement, readings)
        got = ScrapedMetricsSource(fleet, placement, replicas, failed).read(scaler, 3, NOW)
        return got, decide(scaler, 3, got, History.seeded(3, NOW - 1000), NOW)

    got, hostile = decision(body)
    assert_clean(json.dumps([repr(v) for v in got.values()]), hostile.message)
    try:
        parse(body, SERIES_NAMES)
    except ExpositionError:
        _, missing = decision("failing")
        assert (hostile.desired, hostile.reason) == (missing.desired, missing.reason), hostile.message
