"""One simulated cluster: etcd, kube-apiserver, kube-controller-manager, kube-scheduler, a kwok
controller and (when built) the LeaderWorkerSet controller, all on 127.0.0.1, in one directory.

The recipe follows shared/reference/real-engine-build.md §3.5 and §9 (verified on this machine):
token auth with a system:masters user, RBAC, a service-account key pair, the API server's
self-signed serving certificate (its cert-dir), no feature gates (resource.k8s.io/v1 is GA)."""

from __future__ import annotations

import base64
import functools
import json
import os
import socket
import ssl
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx
import yaml

from modelplane.api.fleet import Fleet
from modelplane.api.inference_cluster import InferenceCluster
from modelplane.api.yaml_reader import SAFE_LOADER
from modelplane.node_objects import KWOK_NODE_ANNOTATION, cluster_nodes, device_classes, resource_slices
from modelplane.vocabulary import NVIDIA_DRIVER

from . import pki
from .errors import SimError
from .kube import JsonObject, KubeClient
from .process import Proc, spawn
from .tools import SimTools

LOOPBACK = "127.0.0.1"
SERVICE_CIDR = "10.96.0.0/16"
POD_CIDR = "10.244.0.0/16"
LWS_NAMESPACE = "lws-system"
LWS_POD_SELECTOR = {"matchExpressions": [{"key": "leaderworkerset.sigs.k8s.io/name", "operator": "Exists"}]}
NOT_READY_TAINT = "node.kubernetes.io/not-ready"
PORT_ROLES = ("etcd", "etcd_peer", "apiserver", "controller_manager", "scheduler", "kwok", "lws")

# The Go runtime's memory settings for every process of a cluster (docs/ci.md#memory: a cluster's
# PSS with and without them). GOGC below the default 100 collects before the heap doubles;
# GOMEMLIMIT is a soft ceiling per process, well above what each holds live in the tests, so the
# collector works harder only near it. A value already in the environment wins;
# MODELPLANE_SIM_GO_MEMORY=default leaves the Go defaults (to measure against).
GO_MEMORY: dict[str, dict[str, str]] = {
    "etcd": {"GOGC": "50", "GOMEMLIMIT": "128MiB"},
    # The API server's live heap is ~135 MB once a Pulumi provider has fetched /openapi/v2 (each
    # one does, and the fetch adds ~95 MiB at GOGC=50). A ceiling of 256MiB keeps it at ~245 MiB
    # anonymous instead of ~290. At 224MiB (and GOGC=25) it held ~213, but collected all the
    # time near the ceiling: three API servers spent ~25 s of CPU starting against ~17 s here
    # (~13 s with Go's defaults), on every fleet start of the tests (docs/ci.md#memory).
    "kube-apiserver": {"GOGC": "100", "GOMEMLIMIT": "256MiB"},
    "kube-controller-manager": {"GOGC": "50", "GOMEMLIMIT": "96MiB"},
    "kube-scheduler": {"GOGC": "50", "GOMEMLIMIT": "64MiB"},
    "kwok": {"GOGC": "50", "GOMEMLIMIT": "64MiB"},
    "lws-controller": {"GOGC": "50", "GOMEMLIMIT": "64MiB"},
}


# No watch cache: a few clusters of a few nodes gain nothing from a cache of every resource kind,
# and it was the largest share of an API server's heap (docs/ci.md#memory). Lists and watches are
# then served from etcd (still consistent: the API server reads etcd with quorum reads).
APISERVER_MEMORY_FLAGS = ["--watch-cache=false"]


def go_memory_env(name: str) -> dict[str, str]:
    if os.environ.get("MODELPLANE_SIM_GO_MEMORY") == "default":
        return {}
    return {k: v for k, v in GO_MEMORY.get(name, {}).items() if k not in os.environ}


@dataclass
class ClusterPorts:
    """The loopback ports of one cluster; `apiserver` is the one users talk to."""

    etcd: int
    etcd_peer: int
    apiserver: int
    controller_manager: int
    scheduler: int
    kwok: int
    lws: int

    def items(self) -> list[tuple[str, int]]:
        return list(asdict(self).items())


def crd_documents(path: Path) -> tuple[JsonObject, ...]:
    """The CustomResourceDefinitions of a tool's manifest file, read-only, parsed once per
    process and file version (`_parsed_crds`)."""
    stat = path.stat()
    return _parsed_crds(path, stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=8)
def _parsed_crds(path: Path, _mtime_ns: int, _size: int) -> tuple[JsonObject, ...]:
    # The LWS CRDs are 2.8 MB of YAML. The pure-Python parser took ~2 s of CPU for them, once for
    # every cluster of every fleet: 20-30 s of a two-cluster `sim up` on a loaded 2-core machine,
    # more than the rest of the start. libyaml parses them in ~0.2 s, and only once.
    return tuple(doc for doc in yaml.load_all(path.read_bytes(), Loader=SAFE_LOADER)
                 if isinstance(doc, dict) and doc.get("kind") == "CustomResourceDefinition")


class SimCluster:
    """Starts and populates one cluster. `on_start` is called after every process start so the
    caller can record it before anything else can fail."""

    def __init__(self, name: str, directory: Path, tools: SimTools, ports: ClusterPorts,
                 on_start: Callable[[SimCluster, Proc], None]) -> None:
        self.name = name
        self.dir = directory
        self.tools = tools
        self.ports = ports
        self.on_start = on_start
        self.procs: list[Proc] = []
        self.token = pki.new_token()
        self.kubeconfig = directory / "kubeconfig"
        self.server = f"https://{LOOPBACK}:{ports.apiserver}"
        self.lws_enabled = tools.lws_dir is not None

    # ------------------------------------------------------------------ processes

    def _spawn(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> Proc:
        proc = spawn(name, argv, self.dir / "logs" / f"{name}.log", {**go_memory_env(name), **(env or {})})
        self.procs.append(proc)
        self.on_start(self, proc)
        return proc

    def check_alive(self) -> None:
        """SimError naming the first process that exited, with its log tail (and the port, when it
        could not bind)."""
        for p in self.procs:
            if not p.alive():
                tail = p.log_tail()
                hint = ""
                if "address already in use" in tail:
                    used = [f"{role} {port}" for role, port in self.ports.items() if f":{port}" in tail]
                    hint = (f" Port {', '.join(used) or 'of ' + p.name} on {LOOPBACK} is in use by another "
                            "process: stop that process, or start without --first-port so free ports are picked.")
                raise SimError(f"cluster {self.name}: {p.name} exited (code {p.exit_code()}) while starting.{hint} "
                               f"Log {p.log}:\n{tail}")

    def prepare(self) -> None:
        for sub in ("logs", "pki", "etcd", "certs"):
            (self.dir / sub).mkdir(parents=True, exist_ok=True)
        (self.dir / "tokens.csv").write_text(f'{self.token},admin,admin,"system:masters"\n')
        (self.dir / "tokens.csv").chmod(0o600)
        self.sa_key, self.sa_pub = pki.service_account_keys(self.dir)

    def start_etcd(self) -> None:
        client, peer = f"http://{LOOPBACK}:{self.ports.etcd}", f"http://{LOOPBACK}:{self.ports.etcd_peer}"
        self._spawn("etcd", [
            str(self.tools.bin("etcd")), "--name", "n0", "--data-dir", str(self.dir / "etcd"),
            "--listen-client-urls", client, "--advertise-client-urls", client,
            "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
            "--initial-cluster", f"n0={peer}", "--unsafe-no-fsync", "--log-level", "warn",
            "--auto-compaction-retention", "1", "--quota-backend-bytes", str(2 * 1024**3)])

    def etcd_ready(self) -> bool:
        self.check_alive()
        try:
            resp = httpx.get(f"http://{LOOPBACK}:{self.ports.etcd}/health", timeout=2.0)
        except httpx.HTTPError:
            return False
        return resp.status_code == 200 and resp.json().get("health") == "true"

    def start_apiserver(self) -> None:
        self._spawn("kube-apiserver", [
            str(self.tools.bin("kube-apiserver")),
            "--etcd-servers", f"http://{LOOPBACK}:{self.ports.etcd}",
            "--bind-address", LOOPBACK, "--advertise-address", LOOPBACK, "--secure-port", str(self.ports.apiserver),
            "--cert-dir", str(self.dir / "pki"), "--token-auth-file", str(self.dir / "tokens.csv"),
            "--authorization-mode", "RBAC", "--service-cluster-ip-range", SERVICE_CIDR, "--allow-privileged=true",
            "--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
            "--service-account-key-file", str(self.sa_pub), "--service-account-signing-key-file", str(self.sa_key),
            "--endpoint-reconciler-type", "none", "--enable-priority-and-fairness=false", *APISERVER_MEMORY_FLAGS])

    @property
    def ca_file(self) -> Path:
        """The API server's self-signed serving certificate (with its signing CA), from its cert-dir."""
        return self.dir / "pki" / "apiserver.crt"

    def apiserver_ready(self) -> bool:
        self.check_alive()
        if not self.ca_file.exists():
            return False
        try:
            resp = httpx.get(f"{self.server}/readyz", headers={"Authorization": f"Bearer {self.token}"},
                             verify=ssl.create_default_context(cafile=str(self.ca_file)), timeout=3.0)
        except (httpx.HTTPError, ssl.SSLError):
            return False
        return resp.status_code == 200

    def write_kubeconfig(self) -> None:
        ca = base64.b64encode(self.ca_file.read_bytes()).decode()
        config = {
            "apiVersion": "v1", "kind": "Config", "current-context": self.name, "preferences": {},
            "clusters": [{"name": self.name, "cluster": {"server": self.server, "certificate-authority-data": ca}}],
            "users": [{"name": f"{self.name}-admin", "user": {"token": self.token}}],
            "contexts": [{"name": self.name, "context": {"cluster": self.name, "user": f"{self.name}-admin"}}],
        }
        self.kubeconfig.write_text(yaml.safe_dump(config, sort_keys=False))
        self.kubeconfig.chmod(0o600)

    def client(self) -> KubeClient:
        return KubeClient(self.server, self.token, self.ca_file)

    def start_controllers(self) -> None:
        kubeconfig = str(self.kubeconfig)
        delegated = ["--kubeconfig", kubeconfig, "--authentication-kubeconfig", kubeconfig,
                     "--authorization-kubeconfig", kubeconfig, "--leader-elect=false", "--bind-address", LOOPBACK]
        self._spawn("kube-controller-manager", [
            str(self.tools.bin("kube-controller-manager")), *delegated,
            "--secure-port", str(self.ports.controller_manager), "--cert-dir", str(self.dir / "certs" / "kcm"),
            "--service-account-private-key-file", str(self.sa_key), "--root-ca-file", str(self.ca_file),
            "--use-service-account-credentials=false", "--cluster-name", self.name])
        self._spawn("kube-scheduler", [
            str(self.tools.bin("kube-scheduler")), *delegated,
            "--secure-port", str(self.ports.scheduler), "--cert-dir", str(self.dir / "certs" / "scheduler")])
        stages = [arg for stage in self.tools.stages for arg in ("--config", str(stage))]
        self._spawn("kwok", [
            str(self.tools.bin("kwok")), "--kubeconfig", kubeconfig, "--manage-all-nodes=false",
            f"--manage-nodes-with-annotation-selector={KWOK_NODE_ANNOTATION}=fake",
            "--server-address", f"{LOOPBACK}:{self.ports.kwok}", "--cidr", POD_CIDR,
            "--node-lease-duration-seconds", "40", *stages])
        if self.lws_enabled:
            self._start_lws()

    def _start_lws(self) -> None:
        certs = self.dir / "certs" / "lws"
        pki.serving_cert(certs, "lws-webhook")
        config = {
            "apiVersion": "config.lws.x-k8s.io/v1alpha1", "kind": "Configuration",
            "leaderElection": {"leaderElect": False}, "internalCertManagement": {"enable": False},
            "webhook": {"port": self.ports.lws, "host": LOOPBACK, "certDir": str(certs)},
            "metrics": {"bindAddress": "0"}, "health": {"healthProbeBindAddress": "0"},
        }
        (self.dir / "lws-config.yaml").write_text(yaml.safe_dump(config))
        self._spawn("lws-controller", [str(self.tools.bin("lws-controller")), "--config",
                                       str(self.dir / "lws-config.yaml"), "--zap-log-level", "info"],
                    env={"KUBECONFIG": str(self.kubeconfig)})

    def _healthz(self, port: int, scheme: str = "https") -> bool:
        try:
            resp = httpx.get(f"{scheme}://{LOOPBACK}:{port}/healthz", verify=False, timeout=2.0)
        except httpx.HTTPError:
            return False
        return resp.status_code == 200

    def _tls_listening(self, port: int) -> bool:
        try:
            with socket.create_connection((LOOPBACK, port), timeout=1.0):
                return True
        except OSError:
            return False

    def controllers_ready(self, kube: KubeClient) -> bool:
        """Scheduler and controller-manager healthy, kwok serving, the `default` service account
        created (by the controller-manager; pods cannot be created before it), the LWS webhook up."""
        self.check_alive()
        if not (self._healthz(self.ports.scheduler) and self._healthz(self.ports.controller_manager)
                and self._healthz(self.ports.kwok, "http")):
            return False
        if self.lws_enabled and not self._tls_listening(self.ports.lws):
            return False
        resp = kube.request("GET", "/api/v1/namespaces/default/serviceaccounts/default")
        return resp.status_code == 200

    # ------------------------------------------------------------------ objects

    def install_crds(self, kube: KubeClient, fleet: Fleet, cluster: InferenceCluster) -> list[str]:
        """CRDs of the serving-stack parts the sim runs (LeaderWorkerSet) or can only define
        (NVIDIA ComputeDomain). Installed before the controllers start: the LWS controller gives up
        when its kind does not appear within its cache-sync timeout."""
        files: list[Path] = []
        lws_dir = self.tools.lws_dir
        if lws_dir is not None:
            files += sorted(p for p in lws_dir.glob("*.yaml") if p.name != "manifests.yaml")
        uses_nvidia = any(d.driver == NVIDIA_DRIVER for p in cluster.spec.node_pools
                          for c in [fleet.classes.get(p.class_name or "")] if c for d in c.spec.devices)
        if uses_nvidia:
            files += self.tools.nvidia_crds
        names = []
        for f in files:
            for doc in crd_documents(f):
                kube.create(doc, exist_ok=True)
                names.append(str(doc["metadata"]["name"]))
        return names

    def install_webhooks(self, kube: KubeClient) -> None:
        """The LWS webhook configurations, once the controller serves them."""
        lws_dir = self.tools.lws_dir
        if lws_dir is None:
            return
        kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": LWS_NAMESPACE}}, exist_ok=True)
        for doc in self._lws_webhooks(lws_dir / "manifests.yaml"):
            kube.create(doc, exist_ok=True)

    def _lws_webhooks(self, manifests: Path) -> list[JsonObject]:
        """Upstream's webhook configurations (config/webhook/manifests.yaml) with the Service
        reference replaced by a loopback URL and our CA, and upstream's pod objectSelector
        (config/webhook/{mutating,validating}-patch.yaml) so only LWS pods are intercepted."""
        ca = base64.b64encode((self.dir / "certs" / "lws" / "tls.crt").read_bytes()).decode()
        out = []
        for doc in yaml.safe_load_all(manifests.read_text()):
            if not isinstance(doc, dict) or not doc.get("webhooks"):
                continue
            doc["metadata"]["name"] = f"lws-{doc['metadata']['name']}"
            for hook in doc["webhooks"]:
                path = hook["clientConfig"]["service"]["path"]
                hook["clientConfig"] = {"url": f"https://{LOOPBACK}:{self.ports.lws}{path}", "caBundle": ca}
                if any("pods" in rule.get("resources", []) for rule in hook.get("rules", [])):
                    hook["objectSelector"] = LWS_POD_SELECTOR
            out.append(doc)
        return out

    def crds_established(self, kube: KubeClient, names: list[str]) -> bool:
        for name in names:
            crd = kube.get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")
            conditions = (crd.get("status") or {}).get("conditions") or []
            if not any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions):
                return False
        return True

    def populate(self, kube: KubeClient, fleet: Fleet, cluster: InferenceCluster) -> list[str]:
        """Device classes, nodes (with status) and their ResourceSlices; returns the node names."""
        for obj in device_classes(fleet, cluster):
            kube.create(obj, exist_ok=True)
        nodes = cluster_nodes(fleet, cluster)
        for node in nodes:
            kube.create(node.manifest(), exist_ok=True)
        for obj in resource_slices(fleet, cluster, nodes):
            kube.create(obj, exist_ok=True)
        return [n.name for n in nodes]

    def nodes_ready(self, kube: KubeClient, names: list[str]) -> bool:
        self.check_alive()
        ready = set()
        for node in kube.items("/api/v1/nodes"):
            conditions = (node.get("status") or {}).get("conditions") or []
            # Ready, and the controller-manager has lifted the not-ready taint it put on the new node
            # (pods would wait for that, not fail, so `up` waits for it too).
            taints = (node.get("spec") or {}).get("taints") or []
            if (any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
                    and not any(t.get("key") == NOT_READY_TAINT for t in taints)):
                ready.add(node["metadata"]["name"])
        return set(names) <= ready

    def summary(self) -> dict[str, Any]:
        return {"dir": str(self.dir), "kubeconfig": str(self.kubeconfig), "server": self.server,
                "ports": dict(self.ports.items()), "lws": self.lws_enabled,
                "processes": [p.record() for p in self.procs]}


def dump(obj: object) -> str:
    return json.dumps(obj, indent=2, sort_keys=True) + "\n"
