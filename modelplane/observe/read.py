"""Reading what the fleet's clusters hold: the only I/O of modelplane.observe.

`read_clusters({cluster: kubeconfig})` lists, on every cluster at once (one thread each), the
objects observed capacity and verification need: Nodes, ResourceSlices, ResourceClaims (every
namespace: devices held by anyone) and our own Pods (label app.kubernetes.io/managed-by=modelplane).
Each cluster gets `timeout` seconds in all, however many requests and pages that takes; a
cluster that does not answer in time or refuses is `Unreachable`, one whose kubeconfig is unusable
is `NotRead`, each with the reason. The result holds only the fields the pure modules read, so what reaches a
placement's state is a function of the objects and never of resourceVersions or timestamps.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from modelplane.kube import JsonObject, KubeClient, KubeError
from modelplane.observe import DEFAULT_READ_TIMEOUT_S
from modelplane.vocabulary import LABEL_MANAGED_BY, MANAGED_BY

KUBECONFIG_NAMES = ("{name}/kubeconfig", "{name}.yaml", "{name}.yml", "{name}.kubeconfig", "{name}")

OURS = f"{LABEL_MANAGED_BY}={MANAGED_BY}"
LISTS = {
    "nodes": ("/api/v1/nodes", None),
    "slices": ("/apis/resource.k8s.io/v1/resourceslices", None),
    "claims": ("/apis/resource.k8s.io/v1/resourceclaims", None),
    "pods": ("/api/v1/pods", OURS),
}


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
    """The cluster's kubeconfig is unusable (missing file, no such context, a credential plugin
    that fails): nothing was asked of the cluster, so nothing is known about its health."""

    cluster: str
    reason: str


Reading = ClusterRead | Unreachable | NotRead


def read_cluster(cluster: str, kubeconfig: Path | str, timeout: float = DEFAULT_READ_TIMEOUT_S,
                 context: str | None = None) -> Reading:
    """Every list the observer needs from one cluster, within `timeout` seconds in all."""
    deadline = time.monotonic() + timeout
    try:
        client = KubeClient.from_kubeconfig(kubeconfig, context, timeout=timeout)
    except KubeError as exc:
        return NotRead(cluster, f"kubeconfig unusable: {exc}")
    try:
        with client as kube:
            lists: dict[str, list[JsonObject]] = {}
            for name, (path, selector) in LISTS.items():
                lists[name] = kube.list_all(path, {"labelSelector": selector} if selector else None, deadline)
    except KubeError as exc:
        return Unreachable(cluster, str(exc))
    return ClusterRead(cluster, **lists)


def read_clusters(kubeconfigs: Mapping[str, Path | str], timeout: float = DEFAULT_READ_TIMEOUT_S,
                  contexts: Mapping[str, str] | None = None) -> dict[str, Reading]:
    """`read_cluster` for every cluster concurrently; the call returns within about `timeout`
    seconds whatever the clusters do (a reader still blocked past it is abandoned: daemon
    threads, and the cluster is reported unreachable)."""
    results: dict[str, Reading] = {}
    lock = threading.Lock()

    def run(name: str, path: Path | str) -> None:
        reading: Reading
        try:
            reading = read_cluster(name, path, timeout, (contexts or {}).get(name))
        except Exception as exc:  # noqa: BLE001 - a reader thread must report, never die silently
            reading = NotRead(name, f"reading failed: {type(exc).__name__}: {exc}")
        with lock:
            results[name] = reading

    threads = [threading.Thread(target=run, args=(name, path), name=f"observe-{name}", daemon=True)
               for name, path in sorted(kubeconfigs.items())]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + timeout + 1.0
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
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
