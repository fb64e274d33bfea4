"""The sim's Kubernetes client: the core client (modelplane.kube) raising SimError, plus creating
objects and waiting for conditions (nodes, slices, classes, CRDs; read status). Also used by tests."""

from __future__ import annotations

import time
from typing import Any

from modelplane.json_types import JsonObject as JsonObject  # re-exported: sim.cluster uses it
from modelplane.kube import KubeClient as CoreKubeClient
from modelplane.kube import KubeError
from modelplane.redact import outside_text

from .errors import SimError


def plural(kind: str) -> str:
    """English plural of a kind as the API spells its resource (DeviceClass -> deviceclasses,
    NetworkPolicy -> networkpolicies); true for every built-in kind and CRD the sim uses."""
    low = kind.lower()
    if low.endswith(("s", "x", "ch", "sh")):
        return low + "es"
    if low.endswith("y") and low[-2:-1] not in ("a", "e", "i", "o", "u"):
        return low[:-1] + "ies"
    return low + "s"


def resource_path(api_version: str, kind: str, namespace: str | None = None, name: str | None = None) -> str:
    base = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
    path = base + (f"/namespaces/{namespace}" if namespace else "") + f"/{plural(kind)}"
    return path + (f"/{name}" if name else "")


class KubeClient(CoreKubeClient):
    """The core client (modelplane.kube: kubeconfig, requests, paging) raising SimError, plus
    what the sim needs to build clusters: create objects, wait for a condition."""

    error = SimError

    def create(self, obj: JsonObject, *, exist_ok: bool = False) -> JsonObject:
        meta = obj.get("metadata") or {}
        path = resource_path(obj["apiVersion"], obj["kind"], meta.get("namespace"))
        resp = self.request("POST", path, obj)
        if resp.status_code == 409 and exist_ok:
            return self.get(f"{path}/{meta.get('name')}")
        if resp.status_code not in (200, 201):
            raise SimError(f"creating {obj['kind']} {meta.get('name')} on {self.server} failed: "
                           f"HTTP {resp.status_code} {outside_text(resp.text, limit=500)}")
        try:
            created = resp.json()
        except KubeError as exc:
            raise SimError(str(exc)) from None
        if not isinstance(created, dict):
            raise SimError(f"creating {obj['kind']} {meta.get('name')} on {self.server}: the answer is not an object")
        return created

    def wait(self, what: str, check: Any, timeout: float, interval: float = 0.2) -> Any:
        """Call `check()` until it returns a truthy value; SimError naming `what` after `timeout` s."""
        deadline = time.monotonic() + timeout
        last: Any = None
        while True:
            try:
                last = check()
            except SimError:
                last = None
            if last:
                return last
            if time.monotonic() >= deadline:
                raise SimError(f"{what} did not happen within {timeout:.0f}s on {self.server}")
            time.sleep(interval)
