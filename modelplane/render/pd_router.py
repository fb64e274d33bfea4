"""PrefillDecode routing per engine family: a P/D router in front of the phases, which sends each
request to a prefill server and then (SGLang: together with) a decode server.

SGLang: a decode server rejects a request that carries no bootstrap room ("Disaggregated
request received without bootstrap room id", HTTP 400; sgl-project/sglang#14628,
volcano-sh/kthena#865). The room is assigned by SGLang's PD router, which sends each request
to a prefill and a decode server together. So an SGLang PrefillDecode replica gets a router
Deployment that discovers its prefill and decode pods by label through the Kubernetes API
(`sglang_router.launch_router --pd-disaggregation --service-discovery --prefill-selector ...
--decode-selector ...`; prefill pods publish their bootstrap port in the
`sglang.ai/bootstrap-port` annotation, the router's default `bootstrap_port_annotation`), and
the replica's Service selects the router.

vLLM (NixlConnector): a decode (kv_consumer) instance answers a request that carries no
`kv_transfer_params` by prefilling it itself, so without a proxy the prefill pods idle. vLLM's
router (vllm-project/router, `vllm-router --vllm-pd-disaggregation`, its docs
model-routing/pd-disaggregation.md and environment/kubernetes.md) sends the request to a
prefill server with `max_tokens: 1` and `kv_transfer_params: {do_remote_decode: true}`, then to
a decode server with the `kv_transfer_params` the prefill answered (`--kv-connector nixl`, its
default); it discovers the pods by label like SGLang's (`--service-discovery
--prefill-selector ... --decode-selector ...`). The same Deployment, Role and Service shape.

No `pip install` at run time (a VPC without egress could not run it): each router runs from an
image that carries it, `serving.routerImage` or the family's default (ROUTERS).
"""

from __future__ import annotations

from dataclasses import dataclass

from modelplane.api import Engine
from modelplane.engine_family import command_words, engine_family
from modelplane.naming import child_name
from modelplane.vocabulary import (
    ENGINE_PORT,
    LABEL_COMPONENT,
    LABEL_ENGINE,
    LABEL_PD_ROLE,
    LABEL_SERVING,
    LABEL_WORKLOAD,
    Manifest,
)

from .context import ReplicaContext
from .meta import metadata

ROUTER_COMPONENT = "pd-router"


@dataclass(frozen=True)
class RouterKind:
    """How one engine family's P/D router runs: its default image, the command that starts it,
    the flags that make it pair prefill and decode servers."""

    image: str
    command: tuple[str, ...]
    pd_flags: tuple[str, ...]


# The routers' CLIs are what this module speaks; each image carries its router:
# * lmsysorg/sglang-router:v<version> is built from sgl-project/sglang docker/Dockerfile.router
#   (installs the sgl-router wheel; ENTRYPOINT python3 -m sglang_router.launch_router) and tagged
#   v + sgl-router/py_src/sglang_router/version.py (.github/workflows/release-docker-router.yml):
#   0.3.2, the release whose flags are used here (PyPI sglang-router 0.3.2);
# * vllm/vllm-router:v<X.Y.Z> is built from vllm-project/router Dockerfile.router (the binary at
#   /usr/local/bin/vllm-router) by its release pipeline (.buildkite/README.md); 0.1.17, the
#   release tests/integration/test_vllm_pd_router.py runs (PyPI vllm-router 0.1.17).
ROUTERS: dict[str, RouterKind] = {
    "sglang": RouterKind("lmsysorg/sglang-router:v0.3.2", ("python3", "-m", "sglang_router.launch_router"),
                         ("--pd-disaggregation",)),
    "vllm": RouterKind("vllm/vllm-router:v0.1.17", ("vllm-router",),
                       ("--vllm-pd-disaggregation", "--kv-connector", "nixl")),
}
BOOTSTRAP_ANNOTATION = "sglang.ai/bootstrap-port"
DEFAULT_BOOTSTRAP_PORT = "8998"


def bootstrap_port(engine: Engine) -> str:
    words = command_words(engine)
    for n, word in enumerate(words):
        if word == "--disaggregation-bootstrap-port" and n + 1 < len(words):
            return words[n + 1]
        if word.startswith("--disaggregation-bootstrap-port="):
            return word.split("=", 1)[1]
    return DEFAULT_BOOTSTRAP_PORT


def pd_family(r: ReplicaContext) -> str | None:
    """The family of a PrefillDecode replica whose phase engines all run one family that has a
    P/D router (ROUTERS), else None (Unified, mixed, or an engine of no known family: the
    Service then selects the decode pods, which answer whole requests)."""
    if not r.prefill_decode:
        return None
    families = {engine_family(e) for e in r.deployment.spec.template.spec.engines if e.phase}
    family = families.pop() if len(families) == 1 else None
    return family if family in ROUTERS else None


def sglang_pd(r: ReplicaContext) -> bool:
    """A PrefillDecode replica whose phase engines are all SGLang (its prefill pods announce
    their bootstrap port)."""
    return pd_family(r) == "sglang"


def router_name(replica: str) -> str:
    return child_name(replica, ROUTER_COMPONENT)


def router_selector(r: ReplicaContext) -> dict[str, str]:
    return {LABEL_SERVING: r.name, LABEL_COMPONENT: ROUTER_COMPONENT}


def _selector_args(r: ReplicaContext, phase: str) -> list[str]:
    return [f"{LABEL_SERVING}={r.name}", f"{LABEL_PD_ROLE}={phase}"]


def router_image(r: ReplicaContext, family: str) -> str:
    """`serving.routerImage` (a mirror in a VPC without egress), else the family's default."""
    serving = r.deployment.spec.template.spec.serving
    return (serving.router_image if serving is not None else None) or ROUTERS[family].image


def router_args(r: ReplicaContext, family: str) -> list[str]:
    """The router's flags: listen where the Service points, discover the replica's phase pods."""
    return ["--host", "0.0.0.0", "--port", str(ENGINE_PORT), *ROUTERS[family].pd_flags, "--service-discovery",
            "--service-discovery-namespace", r.namespace, "--service-discovery-port", str(ENGINE_PORT),
            "--prefill-selector", *_selector_args(r, "prefill"), "--decode-selector", *_selector_args(r, "decode")]


def render_pd_router(r: ReplicaContext) -> list[Manifest]:
    """ServiceAccount, Role and binding (it watches the replica's pods), and the router of the
    replica's family; nothing when it needs none (pd_family)."""
    family = pd_family(r)
    if family is None:
        return []
    name = router_name(r.name)
    labels = {**r.labels, LABEL_ENGINE: ROUTER_COMPONENT}
    pod_labels = {**labels, **router_selector(r), LABEL_WORKLOAD: name}
    meta = metadata(name, labels, r.namespace)
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": meta, "rules": [
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]},
            {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": ["get", "list", "watch"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": meta,
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
         "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": r.namespace}]},
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta, "spec": {
            "replicas": 1, "selector": {"matchLabels": {LABEL_WORKLOAD: name}},
            "template": {"metadata": {"labels": dict(sorted(pod_labels.items()))}, "spec": {
                "serviceAccountName": name,
                "containers": [{
                    "name": "router", "image": router_image(r, family), "command": list(ROUTERS[family].command),
                    "args": router_args(r, family),
                    "ports": [{"name": "http", "containerPort": ENGINE_PORT, "protocol": "TCP"}],
                    "readinessProbe": {"httpGet": {"path": "/health", "port": ENGINE_PORT},
                                       "initialDelaySeconds": 10, "periodSeconds": 10, "timeoutSeconds": 5}}]}}}},
    ]
