"""Environment injected into engine containers, ahead of the user's own entries.

Injected entries come first so the user's values can refer to them with `$(NAME)`
(Kubernetes only expands references to entries defined earlier in the list).
"""

from __future__ import annotations

from modelplane.vocabulary import Manifest

from .cache import HUB_CACHE
from .context import MemberContext
from .meta import MODELEXPRESS_ADDRESS, NIXL_SIDE_CHANNEL_PORT

# The program owns these names: a user entry with the same name would silently
# contradict what the rest of the system relies on, so it is dropped.
RESERVED_PREFIX = "MODELPLANE_"

# Grove's leader pod of gang j is <pcs>-<i>-<group>-<j>-leader-0 in the PCS replica's
# headless service; GROVE_PCSG_NAME already carries <pcs>-<i>-<group>.
GROVE_LEADER_ADDRESS = "$(GROVE_PCSG_NAME)-$(GROVE_PCSG_INDEX)-leader-0.$(GROVE_HEADLESS_SERVICE)"


def value(name: str, val: str) -> Manifest:
    return {"name": name, "value": val}


def field(name: str, path: str) -> Manifest:
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}}


def injected_env(m: MemberContext) -> list[Manifest]:
    r = m.replica
    env = [value("MODELPLANE_SERVED_MODEL_NAME", f"{r.namespace}/{r.deployment_name}")]
    if m.gang == "lws":
        env += [value("MODELPLANE_LEADER_ADDRESS", "$(LWS_LEADER_ADDRESS)"),
                value("MODELPLANE_RANK", "$(LWS_WORKER_INDEX)")]
    elif m.gang == "grove":
        # No MODELPLANE_RANK: env expansion cannot add 1 to GROVE_PCLQ_POD_INDEX, so a
        # worker's rank is GROVE_PCLQ_POD_INDEX + 1 computed by its own command.
        env.append(value("MODELPLANE_LEADER_ADDRESS", GROVE_LEADER_ADDRESS))
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
        if m.modelexpress_loader:
            env.append(value("MODELPLANE_LOAD_FORMAT", "modelexpress"))
        env += [field("POD_NAME", "metadata.name"),
                field("POD_UID", "metadata.uid"),
                field("POD_NAMESPACE", "metadata.namespace")]
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
