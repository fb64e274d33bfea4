"""The Traefik plugins' own Go tests (gateway-plugins/: callerauth, kvroute), compiled by the
machine's Go: the same sources Traefik interprets in the tests that run it."""
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from modelplane.gateway.security import PLUGIN_MODULE, PLUGINS_DIR

# Every plugin module under gateway-plugins/src, so a new plugin's Go tests run without a new test.
MODULES = sorted(str(p.parent.relative_to(PLUGINS_DIR / "src")) for p in (PLUGINS_DIR / "src").glob("*/*/go.mod"))


def test_every_plugin_module_is_found() -> None:
    assert PLUGIN_MODULE in MODULES and "modelplane.local/kvroute" in MODULES, MODULES


@pytest.mark.parametrize("module", MODULES)
def test_the_plugins_go_tests_pass(module: str) -> None:
    go = shutil.which("go")
    if go is None:
        pytest.skip("no Go toolchain on PATH: the plugin is still exercised through Traefik by the other tests")
    env = {**os.environ, "GOPROXY": "off", "GOFLAGS": "-mod=mod"}   # standard library only: nothing to fetch
    done = subprocess.run([go, "test", "-count=1", "./..."], cwd=Path(PLUGINS_DIR) / "src" / module, env=env,
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
