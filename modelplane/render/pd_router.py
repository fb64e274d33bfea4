"""PrefillDecode routing per engine: SGLang needs its PD router in front, vLLM does not.

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
`kv_transfer_params` by prefilling it itself, so routing straight to decode pods works but
does not disaggregate; a P/D-aware proxy is needed for that (docs/rendering.md).
"""

from __future__ import annotations

import shlex

from modelplane.api import Engine
from modelplane.naming import child_name
from modelplane.vocabulary import LABEL_COMPONENT, LABEL_ENGINE, LABEL_PD_ROLE, LABEL_SERVING, LABEL_WORKLOAD, Manifest

from .context import ReplicaContext
from .meta import ENGINE_PORT, metadata

ROUTER_COMPONENT = "pd-router"
ROUTER_IMAGE = "python:3.12-slim"
# Pinned: the router's CLI is what this module speaks (PyPI sglang-router).
ROUTER_REQUIREMENT = "sglang-router==0.3.2"
BOOTSTRAP_ANNOTATION = "sglang.ai/bootstrap-port"
DEFAULT_BOOTSTRAP_PORT = "8998"


def _words(engine: Engine) -> list[str]:
    out: list[str] = []
    for member in engine.members:
        c = member.template.spec.engine
        for entry in [*(c.command or []), *(c.args or [])]:
            try:
                out.extend(shlex.split(entry))
            except ValueError:
                out.extend(entry.split())
    return out


def engine_family(engine: Engine) -> str | None:
    """"sglang" or "vllm" when the engine's image or command line says which, else None."""
    images = " ".join(m.template.spec.engine.image for m in engine.members).lower()
    words = " ".join(_words(engine))
    if "sglang" in images or "sglang.launch_server" in words or "sglang serve" in words:
        return "sglang"
    if "vllm" in images or "vllm" in words:
        return "vllm"
    return None


def bootstrap_port(engine: Engine) -> str:
    words = _words(engine)
    for n, word in enumerate(words):
        if word == "--disaggregation-bootstrap-port" and n + 1 < len(words):
            return words[n + 1]
        if word.startswith("--disaggregation-bootstrap-port="):
            return word.split("=", 1)[1]
    return DEFAULT_BOOTSTRAP_PORT


def sglang_pd(r: ReplicaContext) -> bool:
    """A PrefillDecode replica whose phase engines are all SGLang: it needs the router."""
    if not r.prefill_decode:
        return False
    phased = [e for e in r.deployment.spec.template.spec.engines if e.phase]
    return bool(phased) and all(engine_family(e) == "sglang" for e in phased)


def router_name(replica: str) -> str:
    return child_name(replica, ROUTER_COMPONENT)


def router_selector(r: ReplicaContext) -> dict[str, str]:
    return {LABEL_SERVING: r.name, LABEL_COMPONENT: ROUTER_COMPONENT}


def _selector_args(r: ReplicaContext, phase: str) -> list[str]:
    return [f"{LABEL_SERVING}={r.name}", f"{LABEL_PD_ROLE}={phase}"]


def render_sglang_router(r: ReplicaContext) -> list[Manifest]:
    """ServiceAccount, Role and binding (it watches the replica's pods), and the router."""
    name = router_name(r.name)
    labels = {**r.labels, LABEL_ENGINE: ROUTER_COMPONENT}
    pod_labels = {**labels, **router_selector(r), LABEL_WORKLOAD: name}
    meta = metadata(name, labels, r.namespace)
    args = ["--host", "0.0.0.0", "--port", str(ENGINE_PORT), "--pd-disaggregation", "--service-discovery",
            "--service-discovery-namespace", r.namespace, "--service-discovery-port", str(ENGINE_PORT),
            "--prefill-selector", *_selector_args(r, "prefill"), "--decode-selector", *_selector_args(r, "decode")]
    script = (f"pip install --no-cache-dir --quiet {shlex.quote(ROUTER_REQUIREMENT)} && "
              f"exec python -m sglang_router.launch_router {shlex.join(args)}")
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
                    "name": "router", "image": ROUTER_IMAGE, "command": ["/bin/sh", "-c"], "args": [script],
                    "ports": [{"name": "http", "containerPort": ENGINE_PORT, "protocol": "TCP"}],
                    "readinessProbe": {"httpGet": {"path": "/health", "port": ENGINE_PORT},
                                       "initialDelaySeconds": 10, "periodSeconds": 10, "timeoutSeconds": 5}}]}}}},
    ]
