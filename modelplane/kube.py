"""A minimal Kubernetes API client over httpx: a kubeconfig's server, credentials and CA,
JSON in and out, every call bounded in time.

One home: the observer (modelplane.observe) reads clusters with it, and the simulated clusters
(`sim.KubeClient`) build on it to create their nodes and slices. It speaks only what those need:
GET with paging, POST. Credentials are never part of a message: errors name the kubeconfig,
the server (without user-info) and the path.

Kubeconfig support: the current (or a named) context; `token`, `tokenFile`, client certificate
and key (files or `-data`), `exec` credential plugins (the command runs once, bounded by the
client's timeout; EKS `aws eks get-token` and GKE `gke-gcloud-auth-plugin` use them),
`certificate-authority(-data)` and `insecure-skip-tls-verify`.
"""

from __future__ import annotations

import base64
import json
import os
import ssl
import subprocess
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import yaml

from modelplane.redact import redact_url

JsonObject = dict[str, Any]
PAGE_SIZE = 500                   # objects per list request (the API server pages with `continue`)
DEFAULT_TIMEOUT_S = 30.0


class KubeError(Exception):
    """An API server could not be reached or refused a request, or a kubeconfig is unusable."""


@dataclass(frozen=True)
class KubeAccess:
    """Where a cluster's API server is and how to authenticate, read from a kubeconfig."""

    server: str
    token: str | None = None
    ca_data: str | None = None               # PEM
    cert_pem: str | None = None              # client certificate, PEM
    key_pem: str | None = None               # client key, PEM
    insecure: bool = False

    def __repr__(self) -> str:               # never print credentials
        return f"KubeAccess(server={redact_url(self.server)!r})"


def _decode(data: str, what: str, where: str) -> str:
    try:
        return base64.b64decode(data).decode()
    except (ValueError, UnicodeDecodeError):
        raise KubeError(f"kubeconfig {where}: {what} is not base64-encoded PEM") from None


def _named(entries: Any, name: str, kind: str, where: str) -> Mapping[str, Any]:
    for entry in entries or []:
        if isinstance(entry, dict) and entry.get("name") == name and isinstance(entry.get(kind), dict):
            found: Mapping[str, Any] = entry[kind]
            return found
    raise KubeError(f"kubeconfig {where}: no {kind} named {name!r}")


def _read_text(path: str, base: Path, what: str, where: str) -> str:
    full = Path(path).expanduser()
    full = full if full.is_absolute() else base / full
    try:
        return full.read_text()
    except OSError as exc:
        raise KubeError(f"kubeconfig {where}: cannot read {what} {full}: {exc.strerror or exc}") from None


def _exec_token(spec: Mapping[str, Any], where: str, timeout: float) -> str:
    """Run a client-go exec credential plugin and return the token it prints."""
    command = spec.get("command")
    if not isinstance(command, str):
        raise KubeError(f"kubeconfig {where}: users[].user.exec needs a command")
    env = dict(os.environ)
    env.update({str(e.get("name")): str(e.get("value")) for e in spec.get("env") or [] if isinstance(e, dict)})
    try:
        out = subprocess.run([command, *map(str, spec.get("args") or [])], capture_output=True, text=True,
                             timeout=timeout, env=env, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise KubeError(f"kubeconfig {where}: the credential plugin {command} did not run: {exc}") from None
    if out.returncode != 0:
        raise KubeError(f"kubeconfig {where}: the credential plugin {command} exited {out.returncode}")
    try:
        token = json.loads(out.stdout)["status"]["token"]
    except (ValueError, KeyError, TypeError):
        raise KubeError(f"kubeconfig {where}: the credential plugin {command} printed no ExecCredential "
                        "status.token") from None
    if not isinstance(token, str):
        raise KubeError(f"kubeconfig {where}: the credential plugin {command} printed no token")
    return token


def load_kubeconfig(path: Path | str, context: str | None = None, timeout: float = DEFAULT_TIMEOUT_S) -> KubeAccess:
    """The server and credentials of a kubeconfig's current context (or `context`)."""
    path = Path(path).expanduser()
    where = str(path)
    try:
        config = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise KubeError(f"cannot read kubeconfig {where}: {exc.strerror or exc}") from None
    except yaml.YAMLError:
        raise KubeError(f"kubeconfig {where} is not valid YAML") from None
    if not isinstance(config, dict):
        raise KubeError(f"kubeconfig {where} is not a kubeconfig (expected a mapping)")
    name = context or config.get("current-context")
    if not isinstance(name, str) or not name:
        raise KubeError(f"kubeconfig {where} has no current-context; name one")
    ctx = _named(config.get("contexts"), name, "context", where)
    cluster = _named(config.get("clusters"), str(ctx.get("cluster")), "cluster", where)
    user = _named(config.get("users"), str(ctx.get("user")), "user", where) if ctx.get("user") else {}
    server = cluster.get("server")
    if not isinstance(server, str) or not server:
        raise KubeError(f"kubeconfig {where}: cluster {ctx.get('cluster')!r} has no server")
    base = path.parent
    ca = (_decode(cluster["certificate-authority-data"], "certificate-authority-data", where)
          if cluster.get("certificate-authority-data")
          else _read_text(cluster["certificate-authority"], base, "certificate-authority", where)
          if cluster.get("certificate-authority") else None)
    token = user.get("token") if isinstance(user.get("token"), str) else None
    if token is None and user.get("tokenFile"):
        token = _read_text(str(user["tokenFile"]), base, "tokenFile", where).strip()
    if token is None and isinstance(user.get("exec"), dict):
        token = _exec_token(user["exec"], where, timeout)
    cert = (_decode(user["client-certificate-data"], "client-certificate-data", where)
            if user.get("client-certificate-data")
            else _read_text(user["client-certificate"], base, "client-certificate", where)
            if user.get("client-certificate") else None)
    key = (_decode(user["client-key-data"], "client-key-data", where) if user.get("client-key-data")
           else _read_text(user["client-key"], base, "client-key", where) if user.get("client-key") else None)
    return KubeAccess(server, token, ca, cert, key, bool(cluster.get("insecure-skip-tls-verify")))


def _ssl_context(access: KubeAccess) -> ssl.SSLContext | bool:
    if access.insecure:
        return False
    ctx = ssl.create_default_context(cadata=access.ca_data) if access.ca_data else ssl.create_default_context()
    if access.cert_pem and access.key_pem:
        # The ssl module loads a client certificate only from files: a private directory that
        # lives for the duration of this call.
        with tempfile.TemporaryDirectory(prefix="modelplane-kube-") as tmp:
            cert, key = Path(tmp) / "client.crt", Path(tmp) / "client.key"
            cert.write_text(access.cert_pem)
            key.touch(mode=0o600)
            key.write_text(access.key_pem)
            ctx.load_cert_chain(str(cert), str(key))
    return ctx


class KubeClient:
    """Requests to one API server. `error` is the exception type raised (subclasses that
    belong to another package raise their own)."""

    error: type[Exception] = KubeError

    def __init__(self, server: str, token: str | None = None, ca_file: Path | None = None,
                 timeout: float = DEFAULT_TIMEOUT_S, *, access: KubeAccess | None = None) -> None:
        if access is None:
            ca = ca_file.read_text() if ca_file else None
            access = KubeAccess(server, token, ca, insecure=ca_file is None)
        self.server = redact_url(access.server)
        headers = {"Authorization": f"Bearer {access.token}"} if access.token else {}
        self.http = httpx.Client(base_url=access.server, headers=headers, verify=_ssl_context(access),
                                 timeout=timeout)

    @classmethod
    def from_kubeconfig(cls, path: Path | str, context: str | None = None,
                        timeout: float = DEFAULT_TIMEOUT_S) -> KubeClient:
        """A client for the current (or named) context of a kubeconfig."""
        try:
            access = load_kubeconfig(path, context, timeout)
            return cls(access.server, timeout=timeout, access=access)
        except KubeError as exc:
            raise cls.error(str(exc)) from None
        except (ssl.SSLError, ValueError, OSError) as exc:
            raise cls.error(f"kubeconfig {path}: its certificate authority or client certificate is not "
                            f"usable ({type(exc).__name__})") from None

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> KubeClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def request(self, method: str, path: str, body: JsonObject | None = None,
                params: Mapping[str, str] | None = None, timeout: float | None = None) -> httpx.Response:
        try:
            if timeout is None:
                return self.http.request(method, path, json=body, params=params)
            return self.http.request(method, path, json=body, params=params, timeout=max(timeout, 0.05))
        except httpx.HTTPError as exc:
            raise self.error(f"the API server at {self.server} did not answer {method} {path}: "
                             f"{type(exc).__name__}: {exc}") from None

    def get(self, path: str, params: Mapping[str, str] | None = None, timeout: float | None = None) -> JsonObject:
        resp = self.request("GET", path, params=params, timeout=timeout)
        if resp.status_code != 200:
            raise self.error(f"GET {path} on {self.server}: HTTP {resp.status_code} {resp.text[:300]}")
        try:
            body: JsonObject = resp.json()
        except ValueError:
            raise self.error(f"GET {path} on {self.server}: the answer is not JSON") from None
        return body

    def items(self, path: str, params: Mapping[str, str] | None = None) -> list[JsonObject]:
        items: list[JsonObject] = self.get(path, params).get("items") or []
        return items

    def list_all(self, path: str, params: Mapping[str, str] | None = None,
                 deadline: float | None = None) -> list[JsonObject]:
        """Every object of a list, page by page; each request gets the time left before
        `deadline` (time.monotonic()), and running out is an error."""
        out: list[JsonObject] = []
        query = {**(params or {}), "limit": str(PAGE_SIZE)}
        while True:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise self.error(f"listing {path} on {self.server} did not finish in time")
            page = self.get(path, query, timeout=left)
            out.extend(page.get("items") or [])
            token = (page.get("metadata") or {}).get("continue")
            if not token:
                return out
            query["continue"] = str(token)
