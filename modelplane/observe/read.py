"""Reading what the fleet's clusters hold: the only I/O of modelplane.observe.

`read_clusters({cluster: kubeconfig})` lists, on every cluster at once (one thread each), the
objects observed capacity and verification need: Nodes, ResourceSlices, ResourceClaims (every
namespace: devices held by anyone) and our own Pods (label app.kubernetes.io/managed-by=modelplane).
Each cluster gets `timeout` seconds in all, however many requests and pages that takes (a
credential plugin's run included), and at most MAX_CLUSTER_READ_BYTES. Only a cluster whose API
server does not answer (in time), or answers that it is failing, is `Unreachable` (an outage:
failover's grace clock starts); one whose kubeconfig or credential is unusable, that refuses
our credentials, or whose answers are too large, too deep, not JSON or of the wrong shape
(modelplane.observe.schema) is `NotRead`, each with the reason as outside text
(modelplane.redact.outside_text). The result holds only the fields the pure modules read, so
what reaches a placement's state is a function of the objects and never of resourceVersions or
timestamps.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from modelplane.kube import BadAnswer, ConfigError, JsonObject, KubeClient, NoAnswer
from modelplane.observe import DEFAULT_READ_TIMEOUT_S
from modelplane.redact import outside_text
from modelplane.vocabulary import LABEL_MANAGED_BY, MANAGED_BY

from .schema import Node, Pod, ResourceClaim, ResourceSlice

KUBECONFIG_NAMES = ("{name}/kubeconfig", "{name}.yaml", "{name}.yml", "{name}.kubeconfig", "{name}")

OURS = f"{LABEL_MANAGED_BY}={MANAGED_BY}"
LISTS: dict[str, tuple[str, str | None, Any]] = {
    "nodes": ("/api/v1/nodes", None, Node),
    "slices": ("/apis/resource.k8s.io/v1/resourceslices", None, ResourceSlice),
    "claims": ("/apis/resource.k8s.io/v1/resourceclaims", None, ResourceClaim),
    "pods": ("/api/v1/pods", OURS, Pod),
}
# Characters of a reason (our words around at most a few hundred characters of the server's).
MAX_REASON = 400


@dataclass(frozen=True)
class ClusterRead:
    """The objects read from one cluster (lists as the API returned them)."""

    cluster: str
    nodes: list[JsonObject] = field(default_factory=list)
    slices: list[JsonObject] = field(default_factory=list)
    claims: list[JsonObject] = field(default_factory=list)
    pods: list[JsonObject] = field(default_factory=list)


@dataclass(frozen=True)
class Unreachable:
    """The API server did not answer (in time), or refused the requests."""

    cluster: str
    reason: str


@dataclass(frozen=True)
class NotRead:
    """Nothing usable was learned: the cluster's kubeconfig or credential is unusable (missing
    file, no such context, a credential plugin that fails), or the API server answered but not
    usably (credentials refused, an answer too large, too deep or of the wrong shape). Nothing
    is known about its health, and it never moves replicas."""

    cluster: str
    reason: str


Reading = ClusterRead | Unreachable | NotRead
R = TypeVar("R")


def _reason(text: object) -> str:
    return outside_text(text, limit=MAX_REASON)


def read_cluster(cluster: str, kubeconfig: Path | str, timeout: float = DEFAULT_READ_TIMEOUT_S,
                 context: str | None = None, cancel: threading.Event | None = None) -> Reading:
    """Every list the observer needs from one cluster, within `timeout` seconds in all."""
    deadline = time.monotonic() + timeout

    def lists(kube: KubeClient) -> ClusterRead:
        found: dict[str, list[JsonObject]] = {}
        for name, (path, selector, shape) in LISTS.items():
            found[name] = kube.list_all(path, {"labelSelector": selector} if selector else None, deadline, shape)
        return ClusterRead(cluster, **found)

    return with_cluster(cluster, kubeconfig, timeout, context, cancel, lists)


def with_cluster(cluster: str, kubeconfig: Path | str, timeout: float, context: str | None,
                 cancel: threading.Event | None, read: Callable[[KubeClient], R]) -> R | Unreachable | NotRead:
    """`read(client)` on a client for the cluster's kubeconfig, its failures sorted into the
    observer's kinds: no answer (in time) is Unreachable; an unusable kubeconfig or answer NotRead."""
    try:
        client = KubeClient.from_kubeconfig(kubeconfig, context, timeout=timeout, cancel=cancel)
    except ConfigError as exc:
        return NotRead(cluster, _reason(f"kubeconfig unusable: {exc}"))
    try:
        with client as kube:
            return read(kube)
    except NoAnswer as exc:
        return Unreachable(cluster, _reason(exc))
    except BadAnswer as exc:
        return NotRead(cluster, _reason(f"answer unusable: {exc}"))
    except ConfigError as exc:
        return NotRead(cluster, _reason(f"kubeconfig unusable: {exc}"))


def read_clusters(kubeconfigs: Mapping[str, Path | str], timeout: float = DEFAULT_READ_TIMEOUT_S,
                  contexts: Mapping[str, str] | None = None) -> dict[str, Reading]:
    """`read_cluster` for every cluster concurrently; the call returns within about `timeout`
    seconds whatever the clusters do. A reader still busy past it is abandoned (a daemon thread;
    the cluster is reported unreachable) and told to stop: it closes its connection at the next
    chunk it receives, so nothing keeps downloading behind a later read (verify --wait)."""
    return concurrently(kubeconfigs, timeout, lambda name, path, cancel: read_cluster(
        name, path, timeout, (contexts or {}).get(name), cancel))


def concurrently(kubeconfigs: Mapping[str, Path | str], timeout: float,
                 read: Callable[[str, Path | str, threading.Event], R]) -> dict[str, R | NotRead | Unreachable]:
    """`read(cluster, kubeconfig, cancel)` for every cluster at once, one daemon thread each,
    sorted by cluster: within about `timeout` seconds; a reader still busy then is told to stop
    (`cancel`) and its cluster is Unreachable; one that raises is NotRead with why."""
    results: dict[str, R | NotRead | Unreachable] = {}
    lock = threading.Lock()
    cancel = threading.Event()

    def run(name: str, path: Path | str) -> None:
        reading: R | NotRead | Unreachable
        try:
            reading = read(name, path, cancel)
        except Exception as exc:  # noqa: BLE001 - a reader thread must report, never die silently
            reading = NotRead(name, _reason(f"reading failed: {type(exc).__name__}: {exc}"))
        with lock:
            results[name] = reading

    threads = [threading.Thread(target=run, args=(name, path), name=f"observe-{name}", daemon=True)
               for name, path in sorted(kubeconfigs.items())]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + timeout + 1.0
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    cancel.set()
    with lock:
        out = dict(results)
    for name in kubeconfigs:
        out.setdefault(name, Unreachable(name, f"no answer within {timeout:g}s"))
    return dict(sorted(out.items()))


def kubeconfigs_in(directory: Path | str, clusters: Iterable[str]) -> dict[str, Path]:
    """The kubeconfig of each cluster found in a directory: `<name>/kubeconfig` (the sim's
    state directory), `<name>.yaml`, `<name>.yml`, `<name>.kubeconfig` or a file `<name>`.
    Clusters without one are absent (they keep their declared capacity)."""
    base = Path(directory).expanduser()
    if not base.is_dir():
        raise ValueError(f"--observe {directory}: not a directory (expected one kubeconfig per cluster)")
    found = {}
    for name in clusters:
        for pattern in KUBECONFIG_NAMES:
            path = base / pattern.format(name=name)
            if path.is_file():
                found[name] = path
                break
    return found
