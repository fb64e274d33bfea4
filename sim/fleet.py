"""The supervisor: one simulated cluster per InferenceCluster of a fleet, started together,
recorded in a state directory, stopped together.

    urls = SimFleet(state_dir).up(fleet)          # {cluster name: kubeconfig path}
    SimFleet(state_dir).status()                  # which clusters run, their kubeconfigs
    SimFleet(state_dir).down()                    # stop every process, free every port

`up` returns with the clusters running (the processes are detached, in their own sessions), so a
CLI, a Pulumi stack or a pytest fixture can use them; `down`, from any process, stops exactly the
processes `up` recorded. When `up` fails or receives SIGINT, SIGTERM or SIGHUP, it stops every
process it started before raising SimError.

State directory layout (docs/sim.md):
    .modelplane-sim          marker: this directory belongs to the sim
    sim.json                 clusters, ports, kubeconfig paths, processes (pid + start time, log)
    <cluster>/kubeconfig     token auth, the API server's own CA
    <cluster>/logs/*.log     one log per process
    <cluster>/{etcd,pki,certs}, tokens.csv, sa.key, sa.pub, lws-config.yaml
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

from modelplane.api import load_documents
from modelplane.api.fleet import Fleet
from modelplane.api.inference_cluster import InferenceCluster
from modelplane.plan import ControlPlane, PlanError, control_plane_cluster
from modelplane.processes import HANDLED_SIGNALS, handling, signal_name

from .cluster import LOOPBACK, PORT_ROLES, ClusterPorts, SimCluster
from .errors import SimError
from .ports import reserve_ports
from .process import Proc, stop
from .state import MARKER, STATE_FILE, check_directory, is_ours, read_state
from .tools import BUILD_HINT, SimTools, find_tools

DEFAULT_STATE_DIR = ".modelplane/sim"  # relative to the working directory (the CLI's and the sim stack's)
DEFAULT_TIMEOUT_S = 120.0


def simulated_clusters(fleet: Fleet) -> dict[str, InferenceCluster]:
    """The clusters `up` starts: the fleet's, plus the stacks' own control cluster when the fleet's
    InferenceGateway names none of them (`pulumi up -s sim` reaches it like the others). It is shaped
    like the kind stack's control cluster: a Kind cluster without worker pools, whose one node (the
    control plane, untainted) runs the control-plane gateway's pod (modelplane.node_objects)."""
    clusters = dict(fleet.clusters)
    try:
        name, in_fleet, _ = control_plane_cluster(fleet, ControlPlane())
    except PlanError:
        return clusters  # a gateway the program refuses: the stacks say so, not the sim
    if not in_fleet and name not in clusters:
        manifest = {"apiVersion": "modelplane.ai/v1alpha1", "kind": "InferenceCluster", "metadata": {"name": name},
                    "spec": {"cluster": {"source": "Kind", "kind": {}}}}
        clusters[name] = load_documents([manifest], source="<the stacks' control cluster>").clusters[name]
    return clusters


class Interrupted(BaseException):
    """A signal arrived while `up` was starting processes (BaseException: nothing may swallow it)."""


@dataclass
class ClusterStatus:
    name: str
    running: bool
    kubeconfig: Path
    server: str
    processes: dict[str, bool] = field(default_factory=dict)
    # When `up` started it (UTC, ISO 8601): a restarted sim is a new, empty cluster.
    started_at: str = ""
    ports: dict[str, int] = field(default_factory=dict)  # role -> loopback port (docs/sim.md)


def port_free(port: int) -> bool:
    """Nothing listens on the port. SO_REUSEADDR, as the Go servers set it: a connection in
    TIME_WAIT on that port does not stop them from listening, so it does not count as in use."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((LOOPBACK, port))
        except OSError:
            return False
    return True


def port_listening(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        return s.connect_ex((LOOPBACK, port)) == 0


def free_ports(count: int) -> list[int]:
    """`count` distinct free ports, reserved in the per-user ledger (sim/ports.py) so that no other
    process (another xdist worker, another `sim up`) is handed them before our servers bind them."""
    return reserve_ports(count, port_free)


def assign_ports(names: list[str], first_port: int | None) -> dict[str, ClusterPorts]:
    """Ports per cluster: free ones picked by the kernel, or consecutive ones from `first_port`
    (checked free; a port in use is an error naming it)."""
    per = len(PORT_ROLES)
    if first_port is None:
        pool = free_ports(per * len(names))
    else:
        pool = list(range(first_port, first_port + per * len(names)))
        if pool[-1] > 65535:
            raise SimError(f"--first-port {first_port} leaves too few ports for {len(names)} clusters "
                           f"({per} each); choose a lower one")
        for i, port in enumerate(pool):
            if not port_free(port):
                cluster, role = names[i // per], PORT_ROLES[i % per]
                raise SimError(f"port {LOOPBACK}:{port} ({role} of cluster {cluster}) is in use by another process; "
                               f"stop that process, choose another --first-port, or omit --first-port so free "
                               f"ports are picked")
    return {name: ClusterPorts(*pool[i * per:(i + 1) * per]) for i, name in enumerate(names)}


def _signals_interrupt() -> AbstractContextManager[None]:
    """Turn SIGINT/SIGTERM/SIGHUP into Interrupted while starting (main thread only: Python
    delivers signals there; elsewhere the caller owns signal handling)."""
    def handler(signum: int, _frame: FrameType | None) -> None:
        raise Interrupted(signal_name(signum))

    return handling(handler, HANDLED_SIGNALS)


class SimFleet:
    """Simulated clusters of one fleet, recorded in `state_dir`."""

    def __init__(self, state_dir: str | Path, *, timeout: float = DEFAULT_TIMEOUT_S,
                 first_port: int | None = None, tools: SimTools | None = None) -> None:
        # absolute, not resolved: a symlinked --state-dir is refused (sim.state), never followed
        self.state_dir = Path(os.path.abspath(Path(state_dir).expanduser()))
        self.timeout = timeout
        self.first_port = first_port
        self._tools = tools
        self._clusters: list[SimCluster] = []
        self._state: dict[str, Any] = {}

    # ------------------------------------------------------------------ state

    @property
    def state_file(self) -> Path:
        return self.state_dir / STATE_FILE

    def _read_state(self) -> dict[str, Any] | None:
        return read_state(self.state_dir)

    def _write_state(self) -> None:
        self._state["clusters"] = {c.name: c.summary() for c in self._clusters}
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(self._state, indent=2, sort_keys=True) + "\n")
        os.replace(tmp, self.state_file)

    def _recorded(self, state: dict[str, Any]) -> list[tuple[str, Proc]]:
        return [(name, Proc.from_record(rec)) for name, c in sorted((state.get("clusters") or {}).items())
                for rec in c.get("processes") or []]

    def _claim_state_dir(self) -> None:
        """Refuse a directory that is running, stale, or not ours; otherwise make it empty and ours."""
        state = self._read_state()
        if state is not None:
            alive = [f"{c}/{p.name}" for c, p in self._recorded(state) if p.alive()]
            if alive:
                raise SimError(f"simulated clusters already run from {self.state_dir} ({', '.join(alive)}); "
                               f"stop them with `python -m modelplane sim down --state-dir {self.state_dir}` "
                               "or use another --state-dir")
            raise SimError(f"{self.state_dir} holds a stale sim state (its processes are gone, e.g. after a "
                           f"reboot or a kill -9); clear it with `python -m modelplane sim down --state-dir "
                           f"{self.state_dir}` and run `sim up` again")
        if check_directory(self.state_dir):
            entries = [e for e in self.state_dir.iterdir() if e.name != MARKER]
            if entries and not is_ours(self.state_dir):
                raise SimError(f"state directory {self.state_dir} is not empty and is not a sim state directory; "
                               "choose a new or empty --state-dir")
            for entry in entries:  # leftovers (logs) of an earlier failed start
                shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
        self.state_dir.mkdir(parents=True, exist_ok=True)
        (self.state_dir / MARKER).write_text("state directory of `python -m modelplane sim`\n")

    # ------------------------------------------------------------------ up

    def up(self, fleet: Fleet, source: str = "") -> dict[str, Path]:
        """Start one simulated cluster per InferenceCluster; return {cluster: kubeconfig}.
        On any failure or signal, stop everything started and raise SimError."""
        if not fleet.clusters:
            raise SimError(f"the fleet{' in ' + source if source else ''} declares no InferenceCluster; "
                           "there is nothing to simulate")
        tools = self._tools or find_tools()
        missing = tools.missing()
        if missing:
            raise SimError(f"the simulated clusters need tools that are not built in {tools.root}: "
                           f"{', '.join(missing)}; {BUILD_HINT}")
        self._claim_state_dir()
        clusters = simulated_clusters(fleet)
        names = sorted(clusters)
        ports = assign_ports(names, self.first_port)
        self._state = {"version": 1, "manifests": source, "tools": str(tools.root), "ready": False,
                       "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        self._clusters = [SimCluster(n, self.state_dir / n, tools, ports[n], self._on_start) for n in names]
        try:
            with _signals_interrupt():
                self._start(fleet, clusters)
        except Interrupted as sig:
            self._abort()
            raise SimError(f"interrupted by {sig}; every process the sim had started was stopped") from None
        except SimError as exc:
            self._abort()
            raise SimError(f"{exc}\nEvery process the sim had started was stopped.") from None
        except Exception as exc:  # noqa: BLE001 - any bug still must not leave processes behind
            self._abort()
            raise SimError(f"starting the simulated clusters failed unexpectedly ({type(exc).__name__}: {exc}); "
                           "every process the sim had started was stopped") from None
        self._state["ready"] = True
        self._write_state()
        return {c.name: c.kubeconfig for c in self._clusters}

    def _on_start(self, _cluster: SimCluster, _proc: Proc) -> None:
        self._write_state()

    def _wait(self, what: str, ready: Callable[[SimCluster], bool], log: str) -> None:
        deadline = time.monotonic() + self.timeout
        pending = list(self._clusters)
        while pending:
            pending = [c for c in pending if not ready(c)]
            if not pending:
                return
            if time.monotonic() >= deadline:
                c = pending[0]
                raise SimError(f"cluster {c.name}: {what} did not become ready within {self.timeout:g}s. The "
                               f"machine may be busy: retry with a larger --timeout, or read {c.dir / 'logs' / log}")
            time.sleep(0.2)

    def _start(self, fleet: Fleet, specs: dict[str, InferenceCluster]) -> None:
        for c in self._clusters:
            c.prepare()
        for c in self._clusters:
            c.start_etcd()
        self._wait("etcd", lambda c: c.etcd_ready(), "etcd.log")
        for c in self._clusters:
            c.start_apiserver()
        self._wait("kube-apiserver", lambda c: c.apiserver_ready(), "kube-apiserver.log")
        for c in self._clusters:
            c.write_kubeconfig()
        clients = {c.name: c.client() for c in self._clusters}
        try:
            crds = {c.name: c.install_crds(clients[c.name], fleet, specs[c.name]) for c in self._clusters}
            self._wait("CRDs", lambda c: c.crds_established(clients[c.name], crds[c.name]), "kube-apiserver.log")
            for c in self._clusters:
                c.start_controllers()
            self._wait("kube-controller-manager, kube-scheduler, kwok and the LWS controller",
                       lambda c: c.controllers_ready(clients[c.name]), "kube-controller-manager.log")
            for c in self._clusters:
                c.install_webhooks(clients[c.name])
            nodes = {c.name: c.populate(clients[c.name], fleet, specs[c.name]) for c in self._clusters}
            self._wait("kwok nodes", lambda c: c.nodes_ready(clients[c.name], nodes[c.name]), "kwok.log")
        finally:
            for client in clients.values():
                client.close()

    def _abort(self) -> None:
        """Stop every process started so far; keep only the logs, and no state file."""
        procs = [p for c in self._clusters for p in c.procs]
        with _ignore_signals():
            stop(procs)
            self.state_file.unlink(missing_ok=True)
            for c in self._clusters:
                for entry in c.dir.iterdir() if c.dir.exists() else []:
                    if entry.name != "logs":
                        shutil.rmtree(entry, ignore_errors=True) if entry.is_dir() else entry.unlink(missing_ok=True)

    # ------------------------------------------------------------------ down / status

    def down(self) -> list[str]:
        """Stop every recorded process and remove the state directory; returns the cluster names.
        A stale directory (processes already gone) is cleared the same way."""
        state = self._read_state()
        if state is None or not is_ours(self.state_dir):
            if state is None and is_ours(self.state_dir):
                shutil.rmtree(self.state_dir, ignore_errors=True)
                return []
            raise SimError(f"no simulated clusters are recorded in {self.state_dir} (no {STATE_FILE} next to the "
                           f"{MARKER} marker `sim up` writes); nothing was stopped or removed. Pass the --state-dir "
                           "that `sim up` used")
        recorded = self._recorded(state)
        own = {(p.pid, p.start): p for c in self._clusters for p in c.procs}
        procs = [own.get((p.pid, p.start), p) for _, p in recorded]
        left = stop(procs)
        if left:
            raise SimError(f"could not stop {', '.join(left)} (pids {[p.pid for p in procs if p.name in left]}); "
                           f"stop them by hand, then run `sim down --state-dir {self.state_dir}` again")
        ports = [int(port) for c in (state.get("clusters") or {}).values() for port in (c.get("ports") or {}).values()]
        deadline = time.monotonic() + 5.0
        while any(port_listening(p) for p in ports) and time.monotonic() < deadline:
            time.sleep(0.1)
        shutil.rmtree(self.state_dir, ignore_errors=True)
        self._clusters = []
        return sorted(state.get("clusters") or {})

    def status(self) -> list[ClusterStatus]:
        state = self._read_state()
        if state is None:
            return []
        out = []
        for name, c in sorted((state.get("clusters") or {}).items()):
            procs = {str(r["name"]): Proc.from_record(r).alive() for r in c.get("processes") or []}
            out.append(ClusterStatus(name, bool(procs) and all(procs.values()) and bool(state.get("ready")),
                                     Path(c["kubeconfig"]), str(c["server"]), procs, str(state.get("started_at", "")),
                                     {str(k): int(v) for k, v in (c.get("ports") or {}).items()}))
        return out

    def __enter__(self) -> SimFleet:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._read_state() is not None:
            self.down()


def _ignore_signals() -> AbstractContextManager[None]:
    """While cleaning up, a second Ctrl-C must not abandon half-stopped processes."""
    return handling(signal.SIG_IGN, HANDLED_SIGNALS)


def up(fleet: Fleet, state_dir: str | Path, **options: Any) -> dict[str, Path]:
    return SimFleet(state_dir, **options).up(fleet)


def down(state_dir: str | Path) -> list[str]:
    return SimFleet(state_dir).down()


def status(state_dir: str | Path) -> list[ClusterStatus]:
    return SimFleet(state_dir).status()
