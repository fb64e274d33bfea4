"""The two Traefik hops as manifests: a Deployment and Service per gateway in
`modelplane-system`, configured with the file provider (traefik-findings §5). The dynamic
configuration the data-path builders produce (modelplane.gateway.config) is a ConfigMap
projected into the directory Traefik watches, so routing changes without a restart.

API keys for hand-written endpoints (egress) reach Traefik one of two ways:
* `secret`: the egress configuration, keys included, is a Secret the Pulumi program
  creates from its encrypted config (live stacks);
* `reference`: the configuration is a ConfigMap whose headers read `{{ env "..." }}`
  (Traefik runs its file provider's files through Go templates with the sprig functions),
  and each variable comes from a Secret in `modelplane-system` that the user creates.
  GitOps output never holds a key's value.

Certificates and caller keys are Secrets mounted as files (modelplane.gateway.security
names the paths): each workload gateway's hop certificate (`<gateway>-hop`: ca.crt,
tls.crt, tls.key), the control plane's client one, the edge certificates, and the callers'
API keys (`<gateway>-callers`, one data key per caller identity). The callerauth plugin's Go
sources travel as a ConfigMap mounted under Traefik's working directory.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import yaml

from modelplane.api import InferenceCluster
from modelplane.api.inference_cluster import GATEWAY_SERVICE_SUFFIX
from modelplane.gateway.config import ServiceRoute, egress_config, egress_entrypoint, external_endpoints, static_config
from modelplane.gateway.kvroute import KV_PLUGIN_MODULE
from modelplane.gateway.security import PLUGIN_MODULE, PLUGINS_DIR, CertFiles, HopTls, hop_server_name
from modelplane.json_types import JsonMapping, JsonObject
from modelplane.naming import child_name
from modelplane.routing import Credential
from modelplane.vocabulary import SYSTEM_NAMESPACE, Manifest

from .meta import component_labels, metadata
from .output import NoAliasDumper

# The configuration (retry on 502-504, failover services) was measured on Traefik 3.7.15;
# an older image rejects the whole file, so the deployed gateway runs the tested version.
TRAEFIK_IMAGE = "traefik:v3.7.15"
WEB_PORT = 8000
# Kind: fixed NodePorts; the control plane reaches workload gateways on the first, and
# the host reaches the control-plane gateway on the second.
NODE_PORT = 30080
CONTROL_NODE_PORT = 30081
STATIC_DIR = "/etc/traefik/static"
CONFIG_DIR = "/etc/traefik/dynamic"
EGRESS_BASE_PORT = 9100
CONTROL_GATEWAY = "modelplane-gateway"
# Longest Secret name Kubernetes accepts (a DNS subdomain).
MAX_SECRET_NAME = 253

EgressMode = Literal["secret", "reference"]

# Inside the Traefik container. Traefik reads local plugins from ./plugins-local.
WORK_DIR = "/modelplane"
PLUGINS_MOUNT = f"{WORK_DIR}/plugins-local"
HOP_DIR = "/etc/modelplane/hop"           # ca.crt, tls.crt, tls.key
TLS_DIR = "/etc/modelplane/tls"           # one directory per edge certificate Secret
CALLERS_DIR = "/etc/modelplane/callers"   # one file per caller identity
PLAIN_PORT = 8080                         # Redirect mode: plain HTTP, redirected only
# The roots the egress verifies providers' certificates against: the Traefik image's bundle.
EGRESS_ROOTS = "/etc/ssl/certs/ca-certificates.crt"
HOP_KEYS = ("ca.crt", "tls.crt", "tls.key")
SELF_SIGNED_SECRET = f"{CONTROL_GATEWAY}-tls-self-signed"


@dataclass(frozen=True)
class SecretVolume:
    """A Secret in modelplane-system the gateway mounts read-only at `mount`."""

    secret: str
    mount: str


def hop_secret_name(gateway: str) -> str:
    """The Secret with a gateway's hop certificate, its key and the hop CA."""
    return f"{gateway}-hop"


def callers_secret_name(gateway: str) -> str:
    return f"{gateway}-callers"


def hop_files(directory: str = HOP_DIR) -> tuple[str, CertFiles]:
    return f"{directory}/ca.crt", CertFiles(f"{directory}/tls.crt", f"{directory}/tls.key")


def workload_hop() -> HopTls:
    """A workload gateway's side of the hop: its server certificate, client certs from the CA."""
    ca, cert = hop_files()
    return HopTls(ca, cert)


def edge_cert_files(secret: str) -> CertFiles:
    return CertFiles(f"{TLS_DIR}/{secret}/tls.crt", f"{TLS_DIR}/{secret}/tls.key")


def hop_names(cluster: InferenceCluster) -> list[str]:
    """The names a workload gateway's hop certificate is issued to: the stable hop name, and
    the names the control plane may dial it by (a declared hostname, a Kind node's name)."""
    names = [hop_server_name(cluster.metadata.name)]
    if cluster.spec.gateway is not None and cluster.spec.gateway.hostname:
        names.append(cluster.spec.gateway.hostname)
    if cluster.source == "Kind":
        names.append(f"{cluster.metadata.name}-control-plane")
    return names


def hop_server_names(clusters: Mapping[str, InferenceCluster]) -> dict[str, str]:
    """What the control plane verifies each workload gateway's certificate for: its declared
    hostname when it has one, else the stable hop name (modelplane.gateway.security)."""
    return {name: c.spec.gateway.hostname for name, c in clusters.items()
            if c.spec.gateway is not None and c.spec.gateway.hostname}


def workload_gateway_name(cluster: str) -> str:
    return f"{cluster}{GATEWAY_SERVICE_SUFFIX}"   # the load checks the name fits (ClusterMeta)


def egress_name(gateway: str) -> str:
    return f"{gateway}-egress"


def dump(cfg: JsonMapping) -> str:
    """A Traefik configuration file's text. No anchors: the data-path builders share dicts,
    and the text must not depend on that (the same configuration, the same bytes)."""
    return yaml.dump(dict(cfg), Dumper=NoAliasDumper, sort_keys=True)


def static_gateway_url(cluster: InferenceCluster) -> str | None:
    """How the control plane reaches a workload cluster's gateway, when it is known before
    the cluster exists (a declared hostname, or a Kind node's name)."""
    if cluster.spec.gateway is not None and cluster.spec.gateway.hostname:
        return f"https://{cluster.spec.gateway.hostname}"
    if cluster.source == "Kind":
        # Kind nodes are containers on one docker network, resolvable by name.
        return f"https://{cluster.metadata.name}-control-plane:{NODE_PORT}"
    return None


def in_cluster_url(gateway: str, *, tls: bool = False) -> str:
    """A gateway's address inside its own cluster."""
    return f"{'https' if tls else 'http'}://{gateway}.{SYSTEM_NAMESPACE}.svc.cluster.local"


@dataclass(frozen=True)
class EgressKey:
    """One API key the control-plane gateway sends to a hand-written endpoint, named, never held."""

    config_key: str     # "<namespace>/<credential Secret name>": the endpointApiKeys entry
    secret_name: str    # the Secret in modelplane-system holding it (reference mode)
    secret_key: str     # the key inside that Secret
    env: str            # the Traefik container's variable the egress config reads


def egress_secret_name(namespace: str, credential: Credential) -> str:
    """`egress.<namespace>.<credential Secret name>` in modelplane-system (hashed if too long)."""
    name = f"egress.{namespace}.{credential.secret_name}"
    return name if len(name) <= MAX_SECRET_NAME else child_name("egress", namespace, credential.secret_name)


def egress_keys(routes: Sequence[ServiceRoute]) -> list[EgressKey]:
    keys: dict[tuple[str, str, str], EgressKey] = {}
    for ep in external_endpoints(routes):
        cred = ep.credential
        if cred is None or (ep.namespace, cred.secret_name, cred.key) in keys:
            continue
        keys[(ep.namespace, cred.secret_name, cred.key)] = EgressKey(
            f"{ep.namespace}/{cred.secret_name}", egress_secret_name(ep.namespace, cred), cred.key,
            f"MODELPLANE_EGRESS_KEY_{len(keys)}")
    return list(keys.values())


def egress_ports(routes: Sequence[ServiceRoute]) -> dict[str, int]:
    """Egress entrypoint -> its port on 127.0.0.1 (one per hand-written endpoint)."""
    return {egress_entrypoint(ep): EGRESS_BASE_PORT + i for i, ep in enumerate(external_endpoints(routes))}


def egress_urls(routes: Sequence[ServiceRoute]) -> dict[tuple[str, str], str]:
    ports = egress_ports(routes)
    return {ep.key: f"http://127.0.0.1:{ports[egress_entrypoint(ep)]}" for ep in external_endpoints(routes)}


def egress_reference_config(routes: Sequence[ServiceRoute]) -> JsonObject:
    """The egress configuration with `{{ env "..." }}` where each key goes: no key's value."""
    by_credential = {(k.config_key, k.secret_key): k.env for k in egress_keys(routes)}

    def placeholder(namespace: str, credential: Credential) -> str:
        env = by_credential[(f"{namespace}/{credential.secret_name}", credential.key)]
        return f'{{{{ env "{env}" }}}}'

    return egress_config(routes, placeholder, roots=EGRESS_ROOTS)


def _labels(name: str) -> dict[str, str]:
    return component_labels("gateway", {"app": name})


def plugin_files(module: str = PLUGIN_MODULE) -> dict[str, str]:
    """A plugin's sources (tests excluded), file name -> text: callerauth's by default."""
    src = PLUGINS_DIR / "src" / module
    return {p.name: p.read_text() for p in sorted(src.iterdir())
            if p.is_file() and (p.suffix in (".go", ".mod", ".yml")) and not p.name.endswith("_test.go")}


def _plugin_modules(*, callerauth: bool, kvroute: bool) -> list[str]:
    return [m for m, on in ((PLUGIN_MODULE, callerauth), (KV_PLUGIN_MODULE, kvroute)) if on]


def _plugin_key(module: str, file: str) -> str:
    """The ConfigMap key of one plugin file. Both plugins have a go.mod and a .traefik.yml, so
    kvroute's keys carry its name; callerauth's stay the file names they always were."""
    return file if module == PLUGIN_MODULE else f"{module.rsplit('/', 1)[1]}.{file}"


def plugin_configmap(name: str, *, callerauth: bool = True, kvroute: bool = False) -> Manifest:
    """The plugins' Go sources, which Traefik interprets (mounted under ./plugins-local/src/):
    callerauth's and/or kvroute's."""
    data = {_plugin_key(m, f): text for m in _plugin_modules(callerauth=callerauth, kvroute=kvroute)
            for f, text in plugin_files(m).items()}
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": metadata(f"{name}-plugins", _labels(name), SYSTEM_NAMESPACE), "data": data}


def gateway_objects(name: str, *, node_port: int | None, static_routes: Sequence[ServiceRoute] = (),
                    egress: EgressMode | None = None, secrets: Sequence[SecretVolume] = (),
                    tls: bool = False, plugins: bool = False, redirect: bool = False, kvroute: bool = False,
                    service_annotations: Callable[[Sequence[int]], Mapping[str, str]] | None = None
                    ) -> list[Manifest]:
    """The Traefik static ConfigMap, Deployment and Service of one gateway. `static_routes`
    (the routes of hand-written endpoints) decide the egress entrypoints; `egress` how the
    egress configuration is mounted, None for a gateway without any. `secrets` are mounted
    read-only; `tls`: the Service serves HTTPS on 443; `plugins`: the callerauth plugin is
    loaded (its ConfigMap, `plugin_configmap`, is mounted); `kvroute`: the kvroute plugin is loaded
    (the same ConfigMap, with its sources); `redirect`: plain HTTP on 80 only
    redirects; `service_annotations(ports)`: the LoadBalancer Service's annotations for the ports
    it listens on (the cloud's load balancer: modelplane.clouds.aws.gateway_service_annotations)."""
    labels = _labels(name)
    ports = egress_ports(static_routes)
    static = static_config(f":{WEB_PORT}", CONFIG_DIR, {n: f"127.0.0.1:{p}" for n, p in ports.items()},
                           plugins=plugins, plain_address=f":{PLAIN_PORT}" if redirect else None, kvroute=kvroute)
    sources: list[Manifest] = [{"configMap": {"name": f"{name}-routes"}}]
    container: Manifest = {
        "name": "traefik", "image": TRAEFIK_IMAGE, "args": [f"--configFile={STATIC_DIR}/traefik.yaml"],
        "ports": [{"name": "web", "containerPort": WEB_PORT}],
        "readinessProbe": {"tcpSocket": {"port": WEB_PORT}, "periodSeconds": 5},
        "volumeMounts": [{"name": "static", "mountPath": STATIC_DIR},
                         {"name": "dynamic", "mountPath": CONFIG_DIR}],
    }
    volumes: list[Manifest] = [{"name": "static", "configMap": {"name": f"{name}-static"}},
                               {"name": "dynamic", "projected": {"sources": sources}}]
    for i, s in enumerate(secrets):
        container["volumeMounts"].append({"name": f"secret-{i}", "mountPath": s.mount, "readOnly": True})
        volumes.append({"name": f"secret-{i}", "secret": {"secretName": s.secret, "defaultMode": 0o400}})
    if plugins or kvroute:
        container["workingDir"] = WORK_DIR
        container["volumeMounts"].append({"name": "plugins", "mountPath": PLUGINS_MOUNT, "readOnly": True})
        volumes.append({"name": "plugins", "configMap": {"name": f"{name}-plugins", "items": [
            {"key": _plugin_key(m, f), "path": f"src/{m}/{f}"}
            for m in _plugin_modules(callerauth=plugins, kvroute=kvroute) for f in plugin_files(m)]}})
    if redirect:
        container["ports"].append({"name": "plain", "containerPort": PLAIN_PORT})
    if egress == "secret":
        sources.append({"secret": {"name": egress_name(name)}})
    elif egress == "reference":
        sources.append({"configMap": {"name": egress_name(name)}})
        container["env"] = [{"name": k.env, "valueFrom": {"secretKeyRef": {"name": k.secret_name, "key": k.secret_key}}}
                            for k in egress_keys(static_routes)]
    port: Manifest = {"name": "https" if tls else "web", "port": 443 if tls else 80, "targetPort": WEB_PORT}
    if node_port:
        port["nodePort"] = node_port
    service_ports = [port]
    if redirect:
        service_ports.append({"name": "plain", "port": 80, "targetPort": PLAIN_PORT})
    lb = service_annotations([p["port"] for p in service_ports]) if service_annotations and not node_port else None
    service_meta = metadata(name, labels, SYSTEM_NAMESPACE, annotations=lb)
    return [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata(f"{name}-static", labels, SYSTEM_NAMESPACE),
         "data": {"traefik.yaml": dump(static)}},
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": metadata(name, labels, SYSTEM_NAMESPACE), "spec": {
            "replicas": 1, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": labels}, "spec": {
                "containers": [container], "volumes": volumes}}}},
        # A LoadBalancer Service is awaited until it has an address, which the service
        # URLs and the control plane's routes need.
        {"apiVersion": "v1", "kind": "Service", "metadata": service_meta, "spec": {
            "type": "NodePort" if node_port else "LoadBalancer", "selector": {"app": name}, "ports": service_ports}},
    ]


def routes_configmap(name: str, dynamic: JsonMapping) -> Manifest:
    """The gateway's dynamic routes (modelplane.gateway.config) as the ConfigMap it watches."""
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": metadata(f"{name}-routes", _labels(name), SYSTEM_NAMESPACE),
            "data": {"routes.yaml": dump(dynamic)}}


def egress_configmap(name: str, static_routes: Sequence[ServiceRoute]) -> Manifest:
    """Reference mode: the egress configuration reading every key from the environment."""
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": metadata(egress_name(name), _labels(name), SYSTEM_NAMESPACE),
            "data": {"egress.yaml": dump(egress_reference_config(static_routes))}}
