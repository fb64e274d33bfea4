"""The callerauth plugin's own Go tests (gateway-plugins/), compiled by the machine's Go:
the same sources Traefik interprets in every test of this directory."""
import os
import shutil
import subprocess

import pytest

from modelplane.gateway.security import PLUGIN_MODULE, PLUGINS_DIR


def test_the_plugins_go_tests_pass():
    go = shutil.which("go")
    if go is None:
        pytest.skip("no Go toolchain on PATH: the plugin is still exercised through Traefik by the other tests")
    env = {**os.environ, "GOPROXY": "off", "GOFLAGS": "-mod=mod"}   # standard library only: nothing to fetch
    done = subprocess.run([go, "test", "-count=1", "./..."], cwd=PLUGINS_DIR / "src" / PLUGIN_MODULE, env=env,
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
