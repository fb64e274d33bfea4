"""Running a client-go exec credential plugin (`users[].user.exec`: EKS `aws eks get-token`,
GKE `gke-gcloud-auth-plugin`) within bounds lightkube's runner does not have: its own process
group, killed whole on timeout (no orphaned children); stdin closed (it cannot prompt);
stdout read up to MAX_PLUGIN_OUTPUT_BYTES; stderr discarded (it may hold anything); and the
ExecCredential parsed with a type and a depth bound. Errors name the command, never its
arguments, environment or output."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import time
from pathlib import Path

import msgspec
from lightkube.config.models import UserExec

from modelplane.json_types import JsonObject
from modelplane.limits import MAX_PLUGIN_OUTPUT_BYTES
from modelplane.processes import kill_group, reap, start
from modelplane.redact import outside_text

from .errors import ConfigError

# client.authentication.k8s.io versions client-go accepts (lightkube's runner knows the first two).
EXEC_API_VERSIONS = ("client.authentication.k8s.io/v1alpha1", "client.authentication.k8s.io/v1beta1",
                     "client.authentication.k8s.io/v1")


class _Status(msgspec.Struct):
    token: str | None = None


class _ExecCredential(msgspec.Struct):
    status: _Status | None = None


def command_name(spec: UserExec) -> str:
    """The plugin as messages name it: the command's file name, never its arguments."""
    return outside_text(Path(spec.command).name or spec.command, limit=80)


def run_plugin(spec: UserExec, where: str, timeout: float, cluster: JsonObject | None = None) -> str:
    """The token the plugin prints (ExecCredential status.token), within `timeout` seconds.
    `cluster` (the plugin's `provideClusterInfo: true`) goes to it as spec.cluster, as client-go
    passes it (plugin/pkg/client/auth/exec/exec.go refreshCredsLocked)."""
    name = command_name(spec)
    if spec.apiVersion not in EXEC_API_VERSIONS:
        raise ConfigError(f"{where}: users[].user.exec.apiVersion of the credential plugin {name} is not one of "
                          f"{', '.join(EXEC_API_VERSIONS)}")
    env = dict(os.environ)
    env.update({var.name: var.value for var in spec.env or []})
    request: JsonObject = {"interactive": False}
    if cluster is not None:
        request["cluster"] = cluster
    env["KUBERNETES_EXEC_INFO"] = json.dumps({"apiVersion": spec.apiVersion, "kind": "ExecCredential",
                                              "spec": request})
    try:
        proc: subprocess.Popen[bytes] = start([spec.command, *(spec.args or [])], stdin=subprocess.DEVNULL,
                                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
                                              close_fds=True)
    except (OSError, ValueError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
        raise ConfigError(f"{where}: the credential plugin {name} could not start: {why}") from None
    try:
        output = _read_output(proc, name, where, time.monotonic() + max(timeout, 0.05))
    finally:
        _stop_group(proc)
    if proc.returncode != 0:
        raise ConfigError(f"{where}: the credential plugin {name} exited {proc.returncode}")
    try:
        credential = msgspec.json.decode(output, type=_ExecCredential)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        credential = None
    token = credential.status.token if credential is not None and credential.status is not None else None
    if not token:
        raise ConfigError(f"{where}: the credential plugin {name} printed no ExecCredential status.token")
    return token


def _read_output(proc: subprocess.Popen[bytes], name: str, where: str, deadline: float) -> bytes:
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    chunks: list[bytes] = []
    size = 0
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise ConfigError(f"{where}: the credential plugin {name} did not finish within the read timeout; "
                              "it was stopped")
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            continue
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        size += len(chunk)
        if size > MAX_PLUGIN_OUTPUT_BYTES:
            raise ConfigError(f"{where}: the credential plugin {name} printed more than {MAX_PLUGIN_OUTPUT_BYTES} "
                              "bytes; it was stopped")
        chunks.append(chunk)
    left = deadline - time.monotonic()
    try:
        proc.wait(timeout=max(left, 0.01))
    except subprocess.TimeoutExpired:
        raise ConfigError(f"{where}: the credential plugin {name} did not exit within the read timeout; "
                          "it was stopped") from None
    return b"".join(chunks)


def _stop_group(proc: subprocess.Popen[bytes]) -> None:
    """Kill what is left of the plugin's process group (it leads its own session) and reap it."""
    kill_group(proc.pid, signal.SIGKILL)
    reap(proc, timeout=5.0)
    if proc.stdout is not None:
        proc.stdout.close()
