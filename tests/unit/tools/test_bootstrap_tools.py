"""scripts/bootstrap-tools refuses to start a 30-minute build on `--help` or a typo."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "bootstrap-tools"


@pytest.mark.parametrize(("argv", "code"), [(["--help"], 0), (["-h"], 0), (["--only", "sim", "--help"], 0),
                                            (["--probe-onyl"], 2)])
def test_19_low_bootstrap_tools_help_starts_no_bootstrap(tmp_path: Path, argv: list[str], code: int) -> None:
    cache = tmp_path / "cache"
    env = {**os.environ, "MODELPLANE_TOOLS_CACHE": str(cache), "PATH": "/nonexistent", "GOPROXY": "off"}
    proc = subprocess.run([sys.executable, str(SCRIPT), *argv], env=env, capture_output=True, text=True, timeout=30)
    assert proc.returncode == code, proc.stderr
    assert not cache.exists()                             # nothing was probed or built
    if code == 0:
        assert "--print-bin-dir" in proc.stdout and "-h, --help" in proc.stdout
    else:
        assert "nothing was built" in proc.stderr
