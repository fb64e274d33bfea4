"""`modelplane replay TRACE`: the table and -o json of a replay, the fleet from flags or from a manifest
directory's placement, and bad input refused with exit 2 and no traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from modelplane.__main__ import main
from tests.unit.kvroute.traces import conversations

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    path = tmp_path / "trace.jsonl"
    path.write_text("".join(json.dumps({"timestamp": round(r.arrival_s * 1000), "input_length": r.input_tokens,
                                        "output_length": r.output_tokens, "hash_ids": list(r.blocks)}) + "\n"
                            for r in conversations(400, conversations=60)))
    return path


def test_prints_ttft_throughput_hit_rate_and_shares(trace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["replay", str(trace), "--clusters", "2", "--replicas", "2"]) == 0
    out = capsys.readouterr().out
    for words in ("router cache-aware: 400 requests, 0 failed", "TTFT p50", "p90", "p99", "output tokens/s",
                  "prefix hit rate", "bytes per cluster per second", "cluster shares: c0"):
        assert words in out


def test_json_carries_the_same_figures(trace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["replay", str(trace), "--router", "wrr", "--clusters", "2", "--replicas", "1", "--limit", "100",
                 "--weights", "3,1", "-o", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["router"] == "wrr" and doc["requests"] == 100 and doc["failed"] == 0
    assert doc["cluster_shares"] == {"c0": 0.75, "c1": 0.25}
    assert 0 < doc["ttft_s"]["p50"] <= doc["ttft_s"]["p90"] <= doc["ttft_s"]["p99"]
    assert doc["prefix_cache_hits"] <= doc["prefix_cache_queries"]


def test_fleet_from_a_manifest_directory(trace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["replay", str(trace), "--manifests", str(ROOT / "examples/canary"), "--service", "ml-team/qwen",
                 "-o", "json"]) == 0
    assert set(json.loads(capsys.readouterr().out)["cluster_shares"]) == {"eu-west", "us-east"}


@pytest.mark.parametrize(("argv", "says"), [
    (["--weights", "1,nan", "--clusters", "2"], "--weights"),
    (["--manifests", "examples/canary"], "--service: the fleet has 4 ModelServices"),
    (["--manifests", "examples/canary", "--service", "nope"], "no single ModelService"),
])
def test_bad_fleet_input_exits_2(trace: Path, capsys: pytest.CaptureFixture[str], argv: list[str], says: str,
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    assert main(["replay", str(trace), *argv]) == 2
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err


def test_bad_trace_exits_2_naming_the_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"timestamp": 0, "input_length": 10, "output_length": NaN, "hash_ids": [0]}\n')
    assert main(["replay", str(path)]) == 2
    assert f"{path}:1" in capsys.readouterr().err


@pytest.mark.parametrize("flag", [["--clusters", "0"], ["--speedup", "inf"], ["--limit", "-1"]])
def test_out_of_range_flags_are_usage_errors(trace: Path, flag: list[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["replay", str(trace), *flag])
    assert exc.value.code == 2
