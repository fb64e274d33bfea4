"""Kubeconfig documents for the client's tests: one cluster, one user, one context."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import yaml

SECRET = "s3cr3t-t0ken-Value-0123456789"
CA = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
EXEC_API = "client.authentication.k8s.io/v1beta1"


def document(server: str = "http://127.0.0.1:9", user: dict[str, Any] | None = None,
             cluster: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Config", "current-context": "ctx",
            "clusters": [{"name": "c", "cluster": {"server": server, **(cluster or {})}}],
            "users": [{"name": "u", "user": user if user is not None else {"token": SECRET}}],
            "contexts": [{"name": "ctx", "context": {"cluster": "c", "user": "u"}}]}


def write(path: Path, doc: dict[str, Any] | str) -> Path:
    path.write_text(doc if isinstance(doc, str) else yaml.safe_dump(doc))
    return path


def ca_data(text: str = CA) -> str:
    return base64.b64encode(text.encode()).decode()


def plugin(*args: str, command: str | None = None) -> dict[str, Any]:
    import sys
    return {"exec": {"apiVersion": EXEC_API, "command": command or sys.executable, "args": list(args)}}
