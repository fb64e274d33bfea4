import socket
import time
from contextlib import contextmanager

import httpx

from modelplane.routing import CLUSTER_LABEL, DEPLOYMENT_LABEL, RouteEntry, replica_endpoint

NS = "ml-team"
SVC = (NS, "chat")


def replica(dep: str, index: int, cluster: str):
    return replica_endpoint(NS, f"{dep}-{index}", dep, cluster, index)


def select(dep: str, weight: int = 1, cluster: str | None = None, priority: int = 0) -> RouteEntry:
    labels = {DEPLOYMENT_LABEL: dep}
    if cluster:
        labels[CLUSTER_LABEL] = cluster
    return RouteEntry(dep, weight, labels, priority)


def wait_only(url: str, replica_name: str, timeout: float = 60.0, run: int = 20, client_kwargs=None) -> None:
    """Poll `url/v1/models` until `run` answers in a row come from `replica_name`.

    Observes health-check detection from the outside (the control plane's API stays
    off because it would expose the egress API keys). `run` must be longer than the
    weighted round robin's period (10 for 90/10): six in a row, the former default,
    happen while a 10% replica is still in rotation, and the test that waited then saw
    it answer again under load.
    """
    deadline, streak = time.monotonic() + timeout, 0
    with httpx.Client(timeout=2.0, **(client_kwargs or {})) as c:
        while time.monotonic() < deadline:
            r = c.get(f"{url}/v1/models")
            streak = streak + 1 if r.headers.get("x-served-by") == replica_name else 0
            if streak >= run:
                return
            time.sleep(0.02)
    raise AssertionError(f"{url} never served only by {replica_name}")


@contextmanager
def refused_port():
    """A 127.0.0.1 port held by a socket that never listens: connections are refused,
    and no other process on the machine can start listening there meanwhile."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield s.getsockname()[1]


CALLER_KEY = "sk-local-caller-0123456789abcdef"


def secure(fleet):
    """Give a LocalFleet with security its one caller; returns the kwargs run_split needs."""
    if fleet.security is None:
        return {}
    fleet.set_callers({"tester": CALLER_KEY})
    return {"api_key": CALLER_KEY, "cafile": fleet.edge_cert.cert if fleet.edge_cert else None}


def wait_only_secure(fleet, url: str, replica_name: str, **kwargs) -> None:
    """wait_only through a fleet whose edge may ask for a key and speak TLS."""
    wait_only(url, replica_name, client_kwargs=_client_kwargs(fleet), **kwargs)


def _client_kwargs(fleet) -> dict:
    if fleet.security is None:
        return {}
    import ssl
    kw: dict = {"headers": {"Authorization": f"Bearer {CALLER_KEY}"}}
    if fleet.edge_cert:
        kw["verify"] = ssl.create_default_context(cafile=fleet.edge_cert.cert)
    return kw
