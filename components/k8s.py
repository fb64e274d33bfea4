"""Small helpers for registering rendered Kubernetes manifests."""

from __future__ import annotations

import re
from typing import Any, Iterable, Sequence

import pulumi
import pulumi_kubernetes as k8s

SKIP_AWAIT = {"pulumi.com/skipAwait": "true"}


def resource_name(*parts: str) -> str:
    """A Pulumi resource name from readable parts (Kubernetes names already are safe)."""
    return re.sub(r"[^A-Za-z0-9_.-]", "-", "-".join(p for p in parts if p))


def config_group(name: str, objs: pulumi.Input[Sequence[dict]], opts: pulumi.ResourceOptions,
                 skip_await: bool = False) -> k8s.yaml.v2.ConfigGroup:
    """One ConfigGroup whose children are named `<name>:<ns>/<obj>`: the prefix keeps two
    groups that render an object of the same name (on different clusters) apart."""
    return k8s.yaml.v2.ConfigGroup(name, objs=objs, resource_prefix=name, skip_await=skip_await, opts=opts)


def split_kinds(objs: Iterable[dict], kinds: Sequence[str]) -> tuple[list[dict], list[dict]]:
    """(objects of the given kinds, the rest), order kept."""
    chosen, rest = [], []
    for obj in objs:
        (chosen if obj.get("kind") in kinds else rest).append(obj)
    return chosen, rest


def unique_by_name(objs: Iterable[dict]) -> list[dict]:
    seen: dict[tuple, dict] = {}
    for obj in objs:
        meta = obj.get("metadata") or {}
        seen.setdefault((obj.get("kind"), meta.get("namespace"), meta.get("name")), obj)
    return [seen[k] for k in sorted(seen, key=lambda k: tuple(str(x) for x in k))]


def child_opts(parent: pulumi.Resource, provider: pulumi.ProviderResource | None,
               depends_on: Sequence[pulumi.Resource] = ()) -> pulumi.ResourceOptions:
    return pulumi.ResourceOptions(parent=parent, provider=provider, depends_on=list(depends_on))


def plain(value: Any) -> Any:
    """Deep copy of a manifest with only JSON types (rendered dicts may hold tuples)."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value
