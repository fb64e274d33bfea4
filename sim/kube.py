"""A small Kubernetes API client over httpx: bearer token, the API server's own CA, JSON in and out.
Enough for the sim (create nodes, slices, classes, CRDs; read status) and for tests."""

from __future__ import annotations

import base64
import ssl
import time
from pathlib import Path
from typing import Any

import httpx
import yaml

from .errors import SimError

JsonObject = dict[str, Any]


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


class KubeClient:
    def __init__(self, server: str, token: str, ca_file: Path | None, timeout: float = 30.0) -> None:
        self.server = server
        self.http = httpx.Client(base_url=server, headers={"Authorization": f"Bearer {token}"},
                                 verify=ssl.create_default_context(cafile=str(ca_file)) if ca_file else False,
                                 timeout=timeout)

    @classmethod
    def from_kubeconfig(cls, path: Path, timeout: float = 30.0) -> KubeClient:
        """A client for the current context of a kubeconfig the sim wrote (token + embedded CA);
        `timeout` bounds every request (seconds)."""
        config = yaml.safe_load(path.read_text())
        context = next(c["context"] for c in config["contexts"] if c["name"] == config["current-context"])
        cluster = next(c["cluster"] for c in config["clusters"] if c["name"] == context["cluster"])
        user = next(u["user"] for u in config["users"] if u["name"] == context["user"])
        client = cls(cluster["server"], user["token"], None, timeout)
        ca = base64.b64decode(cluster["certificate-authority-data"]).decode()
        client.http = httpx.Client(base_url=cluster["server"], headers=dict(client.http.headers),
                                   verify=ssl.create_default_context(cadata=ca), timeout=client.http.timeout)
        return client

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> KubeClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def request(self, method: str, path: str, body: JsonObject | None = None,
                params: dict[str, str] | None = None) -> httpx.Response:
        try:
            return self.http.request(method, path, json=body, params=params)
        except httpx.HTTPError as exc:
            raise SimError(f"the API server at {self.server} did not answer {method} {path}: {exc}") from None

    def get(self, path: str, params: dict[str, str] | None = None) -> JsonObject:
        resp = self.request("GET", path, params=params)
        if resp.status_code != 200:
            raise SimError(f"GET {path} on {self.server}: HTTP {resp.status_code} {resp.text[:300]}")
        body: JsonObject = resp.json()
        return body

    def items(self, path: str, params: dict[str, str] | None = None) -> list[JsonObject]:
        items: list[JsonObject] = self.get(path, params).get("items") or []
        return items

    def create(self, obj: JsonObject, *, exist_ok: bool = False) -> JsonObject:
        meta = obj.get("metadata") or {}
        path = resource_path(obj["apiVersion"], obj["kind"], meta.get("namespace"))
        resp = self.request("POST", path, obj)
        if resp.status_code == 409 and exist_ok:
            return self.get(f"{path}/{meta.get('name')}")
        if resp.status_code not in (200, 201):
            raise SimError(f"creating {obj['kind']} {meta.get('name')} on {self.server} failed: "
                           f"HTTP {resp.status_code} {resp.text[:500]}")
        created: JsonObject = resp.json()
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
