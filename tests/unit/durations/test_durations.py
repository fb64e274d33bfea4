"""Every duration is a finite, positive, bounded number, checked where it enters (the CLI's
options, the stack config, the placement resource's observe input): one parser,
modelplane.durations."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from automation.reconcile import ReconcileError, parse_interval
from components.observe import observe_args
from modelplane.durations import MAX_INTERVAL_S, DurationError, parse_duration, seconds
from modelplane.observe.health import FailoverSettings
from providers.placement import compute_placement
from tests import manifests as g
from tests.unit.observe.test_hardening import run

HOSTILE_TEXT = ["inf", "nan", "-1", "0", "1e999", "10000000000000h", "", "soon"]


@pytest.mark.parametrize("text", HOSTILE_TEXT)
def test_19_11_plan_observe_timeout_and_verify_times_are_refused_unless_finite_and_bounded(
        tmp_path: Path, text: str) -> None:
    manifests = tmp_path / "fleet.yaml"
    manifests.write_text(g.to_yaml([g.gpu_class("x"), g.cluster("a", g.pool("p", "x"))]))
    (tmp_path / "placement.json").write_text('{"deployments": []}')
    for argv in (["plan", str(manifests), "--observe", str(tmp_path), "--observe-timeout", text],
                 ["verify", str(manifests), "--placement", str(tmp_path / "placement.json"), "--observe",
                  str(tmp_path), "--timeout", text],
                 ["verify", str(manifests), "--placement", str(tmp_path / "placement.json"), "--observe",
                  str(tmp_path), "--wait", "nan" if text == "0" else text]):
        code, out, err = run(*argv)
        assert code == 2, (argv, out, err)
        assert "Traceback" not in err and "expected" in err, err


def test_19_11_reconcile_interval_overflow_is_an_error() -> None:
    for text in HOSTILE_TEXT:
        with pytest.raises(ReconcileError):
            parse_interval(text)
    assert parse_interval("7d".replace("7d", f"{int(MAX_INTERVAL_S)}s")) == MAX_INTERVAL_S


@pytest.mark.parametrize("value", [math.nan, math.inf, -1.0, 1e300, 10**400, True, "300"])
def test_19_11_grace_periods_and_timeouts_in_config_are_finite_numbers(value: object) -> None:
    with pytest.raises(DurationError):
        FailoverSettings.from_json({"unreachableGraceSeconds": value})
    with pytest.raises(ValueError, match="modelplane:observe.unreachableGraceSeconds"):
        observe_args({"unreachableGraceSeconds": value})
    with pytest.raises(ValueError, match="modelplane:observe.verifyWaitSeconds"):
        observe_args({"verifyWaitSeconds": value})
    docs = [g.gpu_class("x"), g.cluster("a", g.pool("p", "x"))]
    for block in ({"kubeconfigs": {}, "unreachableGraceSeconds": value},
                  {"kubeconfigs": {}, "timeoutSeconds": value}):
        _, failures = compute_placement({}, {"fleet": docs, "accounting": "Device", "observe": block})
        assert failures and "invalid observe settings" in failures[0].reason, failures


def test_durations_that_are_fine() -> None:
    assert [parse_duration(t, "x", maximum=3600) for t in ("5", "0.5", "500ms", "60s", "2m", "1h")] == [
        5.0, 0.5, 0.5, 60.0, 120.0, 3600.0]
    assert seconds(0, "grace", maximum=10, allow_zero=True) == 0.0
    assert FailoverSettings.from_json({"unreachableGraceSeconds": 0}).unreachable_grace == 0.0
