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
"""
from __future__ import annotations

import os
import shutil
import socket
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from types import TracebackType

from modelplane.gateway.config import (
    ServiceRoute,
    Tuning,
    control_plane_config,
    egress_config,
    egress_entrypoint,
    external_endpoints,
    workload_config,
)
from modelplane.gateway.process import (
    Engine,
    Managed,
    ProcessGroup,
    Traefik,
    listen_socket,
    shielded,
    stop_all,
)
from modelplane.routing import Credential, Endpoint, RouteEntry, compute_weights

# Short intervals so tests observe health changes within a second or two.
FAST = Tuning(health_interval="250ms", health_timeout="1s")  # generous timeout: CI boxes are busy


class LocalFleet:
    def __init__(self, tuning: Tuning = FAST, secrets: Mapping[tuple[str, str, str], str] | None = None) -> None:
        self.tuning = tuning
        self.secrets = dict(secrets or {})  # (namespace, secret name, key) -> value
        with shielded():
            self.work_dir = Path(tempfile.mkdtemp(prefix="modelplane-local-"))
            try:
                self.group = ProcessGroup([self.work_dir])
            except BaseException:
                shutil.rmtree(self.work_dir, ignore_errors=True)
                raise
        self.engines: dict[str, Engine] = {}
        self.workload: dict[str, Traefik] = {}
        self.offline: set[str] = set()     # clusters whose gateway was taken down (take_offline)
        self.control: Traefik | None = None
        # The control plane's web and egress sockets outlive its restarts (same URLs,
        # and requests arriving meanwhile wait in the backlog instead of being refused).
        self._control_sockets: dict[str, socket.socket] = {}
        self._procs: list[Managed] = []

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
                    self.workload[c] = Traefik(f"gateway-{c}", self.work_dir, group=self.group)
                    self._procs.append(self.workload[c])
                fresh.append(self.workload[c])
        wanted = {egress_entrypoint(ep) for ep in externals}
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
                self.control = Traefik("control-plane", self.work_dir, self._control_sockets, group=self.group)
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

    def apply_routes(self, routes: Sequence[ServiceRoute], endpoints: Sequence[Endpoint]) -> list[ServiceRoute]:
        """(Re)configure every gateway for these routes; starts missing gateways."""
        routes = list(routes)
        clusters = sorted({ep.cluster for ep in endpoints if ep.cluster} | set(self.workload))
        externals = external_endpoints(routes)
        self._start_gateways(clusters, externals)
        # Workload gateways first: the control plane's health checks probe them.
        pending = [(self.workload[c], self.workload[c].write(workload_config(c, routes, self.tuning)))
                   for c in clusters if c not in self.offline]
        for gw, marker in pending:
            gw.wait_loaded(marker)
        assert self.control is not None  # started above
        egress_urls = {ep.key: self.egress_url(ep) for ep in externals}
        cp = control_plane_config(routes, {c: gw.url for c, gw in self.workload.items()},
                                  egress_urls, self.tuning)
        self.control.apply(cp, secret=egress_config(routes, self._secret, self.tuning))
        return routes

    def take_offline(self, cluster: str) -> None:
        """Stop a workload cluster's gateway, as if the whole cluster were gone. Routes applied
        later still name its backends (a placement keeps a failed cluster's replicas until it
        answers again): the control plane's health checks drain them; nothing is written there."""
        self.workload[cluster].stop()
        self.offline.add(cluster)

    def service_url(self, namespace: str, service: str) -> str:
        assert self.control is not None, "route() first"
        return f"{self.control.url}/{namespace}/{service}"
