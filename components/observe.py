"""Stack config and args -> the placement resource's `observe` input (docs/observe.md)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from components.args import ClusterAccess, ObserveArgs
from modelplane.observe.health import FailoverSettings

OBSERVE_KEYS = {"timeoutSeconds": "timeout", "unreachableGraceSeconds": "unreachable_grace",
                "unreadyGraceSeconds": "unready_grace"}


def observe_args(value: Any) -> ObserveArgs | None:
    """`modelplane:observe` config: absent or true -> the defaults, false -> off, or a block of
    timeoutSeconds / unreachableGraceSeconds / unreadyGraceSeconds."""
    if value is None or value is True:
        return ObserveArgs()
    if value is False:
        return None
    if not isinstance(value, Mapping) or set(value) - set(OBSERVE_KEYS):
        raise ValueError(f"modelplane:observe must be true, false or a block of {', '.join(OBSERVE_KEYS)}")
    try:
        given = {field: float(value[key]) for key, field in OBSERVE_KEYS.items() if value.get(key) is not None}
    except (TypeError, ValueError):
        raise ValueError(f"modelplane:observe: {', '.join(OBSERVE_KEYS)} are numbers of seconds") from None
    return ObserveArgs(**given)


def observe_input(kubeconfigs: Mapping[str, str], timeout: float, settings: FailoverSettings) -> dict[str, Any]:
    """The placement resource's `observe` input (providers/observe.py reads it)."""
    return {"kubeconfigs": dict(sorted(kubeconfigs.items())), "timeoutSeconds": timeout, **settings.to_json()}


def placement_observe(observe: ObserveArgs | None, access: Mapping[str, ClusterAccess]) -> dict[str, Any] | None:
    """The `observe` input: every cluster reached by a kubeconfig path (a kubeconfig given only
    as a secret's contents is not read at preview: that cluster keeps its declared sizes)."""
    paths = {name: a.kubeconfig_path for name, a in access.items() if a.kubeconfig_path}
    if observe is None or not paths:
        return None
    block = observe_input(paths, observe.timeout, FailoverSettings(observe.unreachable_grace, observe.unready_grace))
    contexts = {name: a.context for name, a in access.items() if a.kubeconfig_path and a.context}
    if contexts:
        block["contexts"] = dict(sorted(contexts.items()))
    return block
