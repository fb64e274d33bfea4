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


def wait_only(url: str, replica_name: str, timeout: float = 5.0, run: int = 20) -> None:
    """Poll `url/v1/models` until `run` answers in a row come from `replica_name`.

    Observes health-check detection from the outside (the control plane's API stays
    off because it would expose the egress API keys). `run` must be longer than the
    weighted round robin's period (10 for 90/10): six in a row, the former default,
    happen while a 10% replica is still in rotation, and the test that waited then saw
    it answer again under load.
    """
    deadline, streak = time.monotonic() + timeout, 0
    with httpx.Client(timeout=2.0) as c:
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
