"""Environment injected into engine containers, ahead of the user's own entries.

Injected entries come first so the user's values can refer to them with `$(NAME)`
(Kubernetes only expands references to entries defined earlier in the list; the rules and
what the controllers add are in modelplane.render.variables).
"""

from __future__ import annotations

from modelplane.vocabulary import (
    LABEL_GROVE_SCALING_GROUP,
    LABEL_GROVE_SCALING_GROUP_INDEX,
    LABEL_GROVE_SET_INDEX,
    Manifest,
)

from .cache import HUB_CACHE
from .context import MemberContext
from .meta import MODELEXPRESS_ADDRESS, NIXL_SIDE_CHANNEL_PORT
from .names import grove_leader_address, podcliqueset_name

# The program owns these names: a user entry with the same name would silently
# contradict what the rest of the system relies on, so it is dropped.
RESERVED_PREFIX = "MODELPLANE_"

# vLLM's and SGLang's own default loader: what MODELPLANE_LOAD_FORMAT says unless ModelExpress's
# is opted in, so `--load-format $(MODELPLANE_LOAD_FORMAT)` always has a value.
DEFAULT_LOAD_FORMAT = "auto"


def value(name: str, val: str) -> Manifest:
    return {"name": name, "value": val}


def field(name: str, path: str) -> Manifest:
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}}


def label(name: str, key: str) -> Manifest:
    """The pod's own label `key`, through the downward API."""
    return field(name, f"metadata.labels['{key}']")


def grove_leader_env(m: MemberContext) -> list[Manifest]:
    """MODELPLANE_LEADER_ADDRESS on Grove, from entries defined before it: Grove appends its
    GROVE_* variables after the container's env, where an env value cannot see them
    (modelplane.render.variables), but it labels every pod with its scaling group, that
    group's replica index and the set's replica index, which the downward API reads."""
    r = m.replica
    pcs = podcliqueset_name(r.name, m.engine.name)
    address = grove_leader_address(pcs, r.namespace, "$(MODELPLANE_GANG_NAME)", "$(MODELPLANE_GANG_INDEX)",
                                   "$(MODELPLANE_GANG_SET_INDEX)")
    return [label("MODELPLANE_GANG_NAME", LABEL_GROVE_SCALING_GROUP),
            label("MODELPLANE_GANG_INDEX", LABEL_GROVE_SCALING_GROUP_INDEX),
            label("MODELPLANE_GANG_SET_INDEX", LABEL_GROVE_SET_INDEX),
            value("MODELPLANE_LEADER_ADDRESS", address)]


def injected_env(m: MemberContext) -> list[Manifest]:
    r = m.replica
    env = [value("MODELPLANE_SERVED_MODEL_NAME", f"{r.namespace}/{r.deployment_name}")]
    if m.gang == "lws":
        env += [value("MODELPLANE_LEADER_ADDRESS", "$(LWS_LEADER_ADDRESS)"),
                value("MODELPLANE_RANK", "$(LWS_WORKER_INDEX)")]
    elif m.gang == "grove":
        # No MODELPLANE_RANK: env expansion cannot add 1 to GROVE_PCLQ_POD_INDEX, so a
        # worker's rank is GROVE_PCLQ_POD_INDEX + 1 computed by its own command.
        env += grove_leader_env(m)
    env.append(value("MODELPLANE_REPLICA", r.name))
    if r.cache is not None:
        env += [value("HF_HUB_CACHE", HUB_CACHE),
                # Offline turns a revision or layout mismatch into a startup error instead
                # of a silent second download of the whole model.
                value("HF_HUB_OFFLINE", "1"),
                value("MODELPLANE_MODEL_REVISION", r.revision or "")]
    if r.modelexpress:
        env += [value("MX_SERVER_ADDRESS", MODELEXPRESS_ADDRESS),
                value("MODEL_EXPRESS_URL", MODELEXPRESS_ADDRESS),
                # Two unpinned caches of one repo may hold different commits, so the PVC,
                # not the repo, is the identity peers must agree on.
                value("MX_MODEL_REVISION", r.cache_pvc or ""),
                value("MX_P2P_METADATA", "1")]
        env += [field("POD_NAME", "metadata.name"),
                field("POD_UID", "metadata.uid"),
                field("POD_NAMESPACE", "metadata.namespace")]
    # Always set, so a command line may pass it whatever the deployment opted in to.
    env.append(value("MODELPLANE_LOAD_FORMAT", "modelexpress" if m.modelexpress_loader else DEFAULT_LOAD_FORMAT))
    if r.prefill_decode and m.engine.phase:
        env += [field("VLLM_NIXL_SIDE_CHANNEL_HOST", "status.podIP"),
                value("VLLM_NIXL_SIDE_CHANNEL_PORT", NIXL_SIDE_CHANNEL_PORT)]
    return env


def merge_env(injected: list[Manifest], user: list[Manifest]) -> list[Manifest]:
    user_names = {e["name"] for e in user}
    kept = [e for e in injected
            if e["name"].startswith(RESERVED_PREFIX) or e["name"] not in user_names]
    kept_names = {e["name"] for e in kept}
    return kept + [e for e in user
                   if not (e["name"].startswith(RESERVED_PREFIX) and e["name"] in kept_names)]
