"""A whole data path on 127.0.0.1: engines, one gateway per workload cluster, and the
control-plane gateway, all configured by the same builders the Pulumi program uses.

    with LocalFleet() as fleet:
        eps = fleet.start_engines(endpoints)           # one mock engine per replica
        fleet.route({("ml", "chat"): entries}, eps)    # weights -> Traefik configs
        url = fleet.service_url("ml", "chat")

`route()` can be called again with a new endpoint set: that is a re-run of the
program, applied through the file provider's watch, not a restart.

Every process joins the fleet's ProcessGroup, whose watchdog removes the work directory
and stops whatever is left when `stop()` closes it, or when this process dies.

With `security` (LocalSecurity) the data path runs as a deployed one does: HTTPS at the
edge with a self-signed certificate made for this fleet, API keys checked by the
callerauth plugin (`set_callers`), and mutual TLS between the hops from a CA made for
this fleet. Certificates, keys and API key files live in the work directory, 0600.
"""
from __future__ import annotations

import os
import shutil
import socket
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import TracebackType

from modelplane.gateway import pki
from modelplane.gateway.config import (
    ServiceRoute,
    Tuning,
    control_plane_config,
    egress_config,
    egress_entrypoint,
    external_endpoints,
    workload_config,
)
from modelplane.gateway.security import (
    PLAIN,
    CallerLimits,
    CertFiles,
    EdgeSecurity,
    HopTls,
    PlainHttp,
    hop_server_name,
)
from modelplane.routing import Credential, Endpoint, RouteEntry, compute_weights
from modelplane.runtime.process import (
    Engine,
    Managed,
    ProcessGroup,
    Traefik,
    listen_socket,
    shielded,
    stop_all,
)

# Short intervals so tests observe health changes within a second or two.
FAST = Tuning(health_interval="250ms", health_timeout="1s")  # generous timeout: CI boxes are busy
EDGE_NAMES = ("127.0.0.1", "localhost")


@dataclass(frozen=True)
class LocalSecurity:
    """Which protections the local data path runs with (all on by default)."""

    edge_tls: bool = True
    auth: bool = True
    mtls: bool = True
    plain_http: PlainHttp = "Refuse"
    limits: CallerLimits = CallerLimits()
    # (namespace, service) -> callers it accepts (ModelService spec.allowedCallers)
    allowed: Mapping[tuple[str, str], tuple[str, ...]] = field(default_factory=dict)


def write_private(path: Path, text: str) -> None:
    """Write a secret file atomically, readable by this user only."""
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def write_pair(directory: Path, stem: str, pair: pki.KeyPair) -> CertFiles:
    files = CertFiles(str(directory / f"{stem}.crt"), str(directory / f"{stem}.key"))
    write_private(Path(files.cert), pair.cert_pem)
    write_private(Path(files.key), pair.key_pem)
    return files


class LocalFleet:
    def __init__(self, tuning: Tuning = FAST, secrets: Mapping[tuple[str, str, str], str] | None = None,
                 security: LocalSecurity | None = None, egress_roots: str | None = None, *,
                 kvroute: bool = False) -> None:
        self.tuning = tuning
        self.kvroute = kvroute              # every gateway loads the kvroute plugin (balancing: CacheAware)
        self.secrets = dict(secrets or {})  # (namespace, secret name, key) -> value
        self.security = security
        self.egress_roots = egress_roots    # CA bundle the egress verifies providers against
        with shielded():
            self.work_dir = Path(tempfile.mkdtemp(prefix="modelplane-local-"))
            try:
                self.group = ProcessGroup([self.work_dir])
            except BaseException:
                shutil.rmtree(self.work_dir, ignore_errors=True)
                raise
        self.pki_dir = self.work_dir / "pki"
        self.keys_dir = self.work_dir / "callers"
        self.edge_cert: CertFiles | None = None
        self._ca: pki.KeyPair | None = None
        self.ca_file: str | None = None
        self._client: CertFiles | None = None
        self._servers: dict[str, CertFiles] = {}
        self.engines: dict[str, Engine] = {}
        self.workload: dict[str, Traefik] = {}
        self.offline: set[str] = set()     # clusters whose gateway was taken down (take_offline)
        self.control: Traefik | None = None
        # The control plane's web and egress sockets outlive its restarts (same URLs,
        # and requests arriving meanwhile wait in the backlog instead of being refused).
        self._control_sockets: dict[str, socket.socket] = {}
        self._procs: list[Managed] = []
        if security is not None:
            try:
                self._make_pki(security)
            except BaseException:
                self.stop()   # the watchdog and the work directory, certificates included
                raise

    def _make_pki(self, security: LocalSecurity) -> None:
        self.pki_dir.mkdir(mode=0o700)
        self.keys_dir.mkdir(mode=0o700)
        if security.edge_tls:
            self.edge_cert = write_pair(self.pki_dir, "edge", pki.self_signed(EDGE_NAMES))
        if security.mtls:
            self._ca = pki.new_ca("modelplane local hop CA")
            self.ca_file = str(self.pki_dir / "hop-ca.crt")
            write_private(Path(self.ca_file), self._ca.cert_pem)
            self._client = write_pair(self.pki_dir, "control-plane-client",
                                      pki.issue(self._ca, "control-plane", "client"))

    def server_cert(self, cluster: str) -> CertFiles:
        """The workload gateway's certificate from the hop CA, issued to its hop server name."""
        assert self._ca is not None
        if cluster not in self._servers:
            name = hop_server_name(cluster)
            self._servers[cluster] = write_pair(self.pki_dir, f"gateway-{cluster}",
                                                pki.issue(self._ca, name, "server", [name]))
        return self._servers[cluster]

    def issue_client(self, name: str, *, other_ca: bool = False) -> CertFiles:
        """A client certificate from the hop CA (or from a CA of its own, which no gateway trusts)."""
        ca = pki.new_ca("some other CA") if other_ca or self._ca is None else self._ca
        return write_pair(self.pki_dir, f"client-{name}", pki.issue(ca, name, "client"))

    def set_callers(self, callers: Mapping[str, str]) -> None:
        """Exactly these callers (identity -> API key, or `sha256:<hex>`), each file replaced
        atomically: what a Secret volume's update does, seen by the next request."""
        assert self.security is not None and self.security.auth, "LocalFleet(security=...) with auth"
        for old in self.keys_dir.iterdir():
            if old.name not in callers:
                old.unlink()
        for name, key in callers.items():
            write_private(self.keys_dir / name, key)

    def _edge(self) -> EdgeSecurity | None:
        sec = self.security
        if sec is None:
            return None
        return EdgeSecurity(tls=self.edge_cert, plain_http=sec.plain_http,
                            keys_dir=str(self.keys_dir) if sec.auth else None, limits=sec.limits,
                            allowed=sec.allowed)

    def _hop(self, cluster: str | None = None) -> HopTls | None:
        if self.ca_file is None or self._client is None:
            return None
        return HopTls(self.ca_file, self.server_cert(cluster) if cluster else self._client)

    # -- lifecycle --------------------------------------------------------------
    def __enter__(self) -> LocalFleet:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def stop(self) -> None:
        with shielded():
            try:
                stop_all(self._procs)
                self._procs.clear()
            finally:
                for s in self._control_sockets.values():
                    s.close()
                self._control_sockets.clear()
                shutil.rmtree(self.work_dir, ignore_errors=True)
                self.group.close()  # whatever is left, e.g. after a stop that failed

    # -- engines ----------------------------------------------------------------
    def start_engine(self, name: str, deployment: str | None = None, extra: Sequence[str] = (),
                     env: Mapping[str, str] | None = None, *, wait: bool = True) -> Engine:
        full_env = dict(os.environ, **(env or {}))
        with shielded():
            eng = Engine(name, self.work_dir, deployment, list(extra), full_env, group=self.group)
            self._procs.append(eng)
        self.engines[name] = eng
        if wait:
            eng.wait_ready()
        return eng

    def start_engines(self, endpoints: Sequence[Endpoint],
                      faults: Mapping[str, Sequence[str]] | None = None) -> list[Endpoint]:
        """Start an engine for every replica endpoint; return them with their URLs set."""
        fresh = [self.start_engine(ep.name, ep.deployment, (faults or {}).get(ep.name, ()), wait=False)
                 for ep in endpoints if not ep.external and ep.name not in self.engines]
        for eng in fresh:  # started together, waited for together
            eng.wait_ready()
        return [ep if ep.external else replace(ep, url=self.engines[ep.name].url) for ep in endpoints]

    def stop_engine(self, name: str, grace: float = 30.0) -> None:
        """Stop one engine the way a pod is stopped: SIGTERM (it refuses new connections and
        finishes what is in flight: modelplane.runtime.mock_engine), SIGKILL after `grace` seconds."""
        eng = self.engines.pop(name)
        with shielded():
            eng.stop(grace)
            self._procs.remove(eng)

    # -- gateways ---------------------------------------------------------------
    def _secret(self, namespace: str, cred: Credential) -> str:
        try:
            return self.secrets[(namespace, cred.secret_name, cred.key)]
        except KeyError:
            raise KeyError(f"secret {namespace}/{cred.secret_name} has no key {cred.key}") from None

    def _start_gateways(self, clusters: Sequence[str], externals: list[Endpoint]) -> None:
        """Start whatever gateway is missing, all at once, then wait for all of them."""
        fresh: list[Traefik] = []
        for c in clusters:
            if c not in self.workload:
                with shielded():
                    self.workload[c] = Traefik(f"gateway-{c}", self.work_dir, group=self.group,
                                               kvroute=self.kvroute)
                    self._procs.append(self.workload[c])
                fresh.append(self.workload[c])
        wanted = {egress_entrypoint(ep) for ep in externals}
        sec = self.security
        if sec is not None and sec.edge_tls and sec.plain_http == "Redirect":
            wanted.add(PLAIN)
        if self.control is None or not wanted <= set(self._control_sockets):
            # Entrypoints are static configuration: a new egress needs a new process,
            # on the same sockets so service URLs stay valid.
            with shielded():
                if self.control is not None:
                    self.control.stop()
                    self._procs.remove(self.control)
                for name in ["web", *sorted(wanted)]:
                    if name not in self._control_sockets:
                        self._control_sockets[name] = listen_socket()
                self.control = Traefik("control-plane", self.work_dir, self._control_sockets, group=self.group,
                                       plugins=sec is not None and sec.auth, kvroute=self.kvroute)
                self._procs.append(self.control)
            fresh.append(self.control)
        for gw in fresh:
            gw.wait_ready()

    def egress_url(self, ep: Endpoint) -> str:
        return f"http://127.0.0.1:{self._control_sockets[egress_entrypoint(ep)].getsockname()[1]}"

    def route(self, services: Mapping[tuple[str, str], Sequence[RouteEntry]],
              endpoints: Sequence[Endpoint]) -> list[ServiceRoute]:
        routes = [
            ServiceRoute(ns, name, tuple(compute_weights(list(entries), endpoints, namespace=ns)))
            for (ns, name), entries in sorted(services.items())
        ]
        return self.apply_routes(routes, endpoints)

    def apply_routes(self, routes: Sequence[ServiceRoute], endpoints: Sequence[Endpoint],
                     workload_routes: Sequence[ServiceRoute] | None = None) -> list[ServiceRoute]:
        """(Re)configure every gateway for these routes; starts missing gateways.
        `workload_routes`: what the workload gateways serve when it differs from the
        control plane's routes (replicas leaving: modelplane.gateway.fleet.leaving_routes)."""
        routes = list(routes)
        local = list(workload_routes) if workload_routes is not None else routes
        clusters = sorted({ep.cluster for ep in endpoints if ep.cluster} | set(self.workload))
        externals = external_endpoints(routes)
        self._start_gateways(clusters, externals)
        # Workload gateways first: the control plane's health checks probe them.
        pending = [(self.workload[c], self.workload[c].write(workload_config(c, local, self.tuning, self._hop(c))))
                   for c in clusters if c not in self.offline]
        for gw, marker in pending:
            gw.wait_loaded(marker)
        assert self.control is not None  # started above
        egress_urls = {ep.key: self.egress_url(ep) for ep in externals}
        cp = control_plane_config(routes, {c: gw.url for c, gw in self.workload.items()},
                                  egress_urls, self.tuning, edge=self._edge(), hop=self._hop())
        self.control.apply(cp, secret=egress_config(routes, self._secret, self.tuning, roots=self.egress_roots))
        return routes

    def take_offline(self, cluster: str) -> None:
        """Stop a workload cluster's gateway, as if the whole cluster were gone. Routes applied
        later still name its backends (a placement keeps a failed cluster's replicas until it
        answers again): the control plane's health checks drain them; nothing is written there."""
        self.workload[cluster].stop()
        self.offline.add(cluster)

    @property
    def edge_url(self) -> str:
        """The control-plane gateway's base URL, https when the edge has TLS."""
        assert self.control is not None, "route() first"
        return self.control.url.replace("http://", "https://", 1) if self.edge_cert else self.control.url

    def plain_url(self) -> str:
        """Redirect mode: the plain-HTTP listener that only redirects."""
        return f"http://127.0.0.1:{self._control_sockets[PLAIN].getsockname()[1]}"

    def service_url(self, namespace: str, service: str) -> str:
        return f"{self.edge_url}/{namespace}/{service}"
