"""The CEL parser cache (modelplane.cel.grammar): each case runs a fresh interpreter, since the
parser is built once per process at import."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import lark

from modelplane.cel.grammar import CACHE_ENV

REPO = Path(__file__).resolve().parents[3]
# Evaluates a selector, and says whether lark loaded the parser from its cache.
PROBE = """
import logging, lark
lark.logger.setLevel(logging.DEBUG)
from modelplane.cel import compile_selector, evaluate_selector, DeviceView
device = DeviceView.from_spec("gpu.nvidia.com", {"productName": {"string": "H100"}}, {"memory": {"value": "80Gi"}})
sel = compile_selector('device.attributes["gpu.nvidia.com"].productName == "H100" && '
                       'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("79Gi")) > 0')
print("MATCH", evaluate_selector(sel, device).matched)
"""


def probe(cache_home: Path, **env: str) -> tuple[str, str]:
    done = subprocess.run([sys.executable, "-c", PROBE], cwd=REPO, capture_output=True, text=True, timeout=120,
                          env={**os.environ, CACHE_ENV: "1", "XDG_CACHE_HOME": str(cache_home), **env}, check=True)
    return done.stdout, done.stderr


def cache_file(cache_home: Path) -> Path:
    return cache_home / "modelplane" / f"cel-parser-lark-{lark.__version__}.cache"


def test_the_first_process_writes_the_cache_and_the_next_loads_it_and_evaluates_the_same(tmp_path: Path) -> None:
    first_out, first_log = probe(tmp_path)
    assert cache_file(tmp_path).is_file()
    assert oct(cache_file(tmp_path).parent.stat().st_mode & 0o777) == "0o700"
    assert "Loading grammar from cache" not in first_log
    second_out, second_log = probe(tmp_path)
    assert "Loading grammar from cache" in second_log, second_log
    assert first_out == second_out == "MATCH True\n"


def test_a_torn_cache_file_is_rebuilt_not_trusted(tmp_path: Path) -> None:
    probe(tmp_path)
    good = cache_file(tmp_path).read_bytes()
    cache_file(tmp_path).write_bytes(good[: len(good) // 3])
    out, log = probe(tmp_path)
    assert out == "MATCH True\n"
    assert "Failed to load Lark from cache" in log
    out, log = probe(tmp_path)                            # rewritten whole: the next one loads it
    assert out == "MATCH True\n"
    assert "Loading grammar from cache" in log and "Failed" not in log, log


def test_switched_off_or_in_a_directory_others_can_write_there_is_no_cache(tmp_path: Path) -> None:
    out, _ = probe(tmp_path, MODELPLANE_CEL_CACHE="0")
    assert out == "MATCH True\n" and not (tmp_path / "modelplane").exists()
    shared = tmp_path / "shared"
    (shared / "modelplane").mkdir(parents=True)
    (shared / "modelplane").chmod(0o777)
    out, log = probe(shared)
    assert out == "MATCH True\n"
    assert not cache_file(shared).exists() and "cache" not in log
