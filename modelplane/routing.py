"""ModelService -> weighted endpoints (reference semantics §4.3), pure and shared.

The Pulumi program and the local Traefik stack both call `service_weights`; nothing
here knows about Traefik or processes. Inputs are plain dataclasses so the function can
be tested without the API models; `route_entries`/`endpoint_from_api` adapt those.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import reduce
from typing import Any
from urllib.parse import urlsplit

from modelplane.api import ModelDeployment, ModelEndpoint, ModelService
from modelplane.vocabulary import LABEL_CLUSTER as CLUSTER_LABEL
from modelplane.vocabulary import LABEL_DEPLOYMENT as DEPLOYMENT_LABEL
from modelplane.vocabulary import LABEL_REPLICA_INDEX as REPLICA_INDEX_LABEL

# Gateway API caps a backendRef weight at 1,000,000; Traefik has no cap, but keeping
# the same numbers means a generated config reads the same in either gateway.
MAX_WEIGHT = 1_000_000


EVEN, CAPACITY = "Even", "Capacity"   # routingPolicy.weighting (ours, modelplane/api/placement_policy.py)


@dataclass(frozen=True)
class RouteEntry:
    name: str
    weight: int = 1
    match_labels: Mapping[str, str] = field(default_factory=dict)
    priority: int = 0
    # Even: the entry's share split evenly over its endpoints (the reference);
    # Capacity: in proportion to each endpoint's `capacity`.
    weighting: str = EVEN

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(labels.get(k) == v for k, v in self.match_labels.items())


@dataclass(frozen=True)
class Credential:
    """Where an API key lives (a Secret name and key); never the key itself."""

    secret_name: str
    key: str = "apiKey"


@dataclass(frozen=True)
class Endpoint:
    """One routable backend: a placed replica, or a hand-written external endpoint.

    `url` is the base the last hop sends to (an engine Service for a replica, the
    provider origin for an external endpoint); `api_prefix` is the path at that base
    which serves what callers reach as `/<ns>/<service>/v1`.
    """

    namespace: str
    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    url: str = ""
    api_prefix: str = "/v1"
    ready: bool = True
    external: bool = False
    credential: Credential | None = None
    api_schema: str = "OpenAI"
    # Serving engine copies behind the endpoint (`serving_capacity`); 1 for an external one.
    capacity: int = 1

    @property
    def key(self) -> tuple[str, str]:
        return (self.namespace, self.name)

    @property
    def cluster(self) -> str | None:
        return None if self.external else self.labels.get(CLUSTER_LABEL)

    @property
    def deployment(self) -> str | None:
        return self.labels.get(DEPLOYMENT_LABEL)


@dataclass(frozen=True)
class WeightedBackend:
    endpoint: Endpoint
    weight: int
    entry: str
    priority: int = 0


def _split(total: int, parts: int) -> list[int]:
    base, rem = divmod(total, parts)
    return [base + (1 if i < rem else 0) for i in range(parts)]


def _capacities(eps: list[Endpoint]) -> list[int]:
    return [max(1, ep.capacity) for ep in eps]


def _scale(live: list[tuple[RouteEntry, list[Endpoint]]]) -> int:
    """The smallest multiplier of every entry's weight such that each endpoint of an Even
    entry gets at least 1 and each Capacity entry divides exactly by its capacities."""
    even = [math.ceil(len(eps) / e.weight) for e, eps in live if e.weighting != CAPACITY]
    step = 1
    for e, eps in live:
        if e.weighting == CAPACITY:
            total = sum(_capacities(eps))
            step = math.lcm(step, total // math.gcd(total, e.weight))
    base = max([1, *even])
    return math.ceil(base / step) * step


def _entry_split(e: RouteEntry, eps: list[Endpoint], scale: int) -> list[int]:
    share = e.weight * scale
    if e.weighting != CAPACITY:
        return _split(share, len(eps))
    caps = _capacities(eps)
    return [share * c // sum(caps) for c in caps]    # exact: _scale made sum(caps) divide share


def _tier_weights(groups: list[tuple[RouteEntry, list[Endpoint]]]) -> list[WeightedBackend]:
    live = [(e, eps) for e, eps in groups if eps]
    if not live:
        return []
    # Scale so every endpoint of every live entry gets at least 1 after splitting.
    scale = _scale(live)
    raw = [(e, ep, w) for e, eps in live for ep, w in zip(eps, _entry_split(e, eps, scale), strict=True)]
    g = reduce(math.gcd, (w for _, _, w in raw))
    weights = [w // g for _, _, w in raw]
    top = max(weights)
    if top > MAX_WEIGHT:
        weights = [max(1, round(w / top * MAX_WEIGHT)) for w in weights]
    return [WeightedBackend(ep, w, e.name, e.priority) for (e, ep, _), w in zip(raw, weights, strict=True)]


def compute_weights(
    entries: Sequence[RouteEntry],
    endpoints: Iterable[Endpoint],
    namespace: str | None = None,
) -> list[WeightedBackend]:
    """Weighted backends for every priority tier, lowest priority number first.

    An endpoint belongs to the first entry (in list order) whose selector matches it,
    whether or not it is ready, so a not-ready endpoint never falls through to a later
    entry. Entries left with no ready endpoint take no share. Weights are computed per
    tier: a higher tier only carries traffic when the lower ones have none healthy.
    """
    pool = sorted(
        (ep for ep in endpoints if namespace is None or ep.namespace == namespace),
        key=lambda ep: ep.key,
    )
    owned: set[tuple[str, str]] = set()
    groups: list[tuple[RouteEntry, list[Endpoint]]] = []
    for entry in entries:
        mine = [ep for ep in pool if ep.key not in owned and entry.matches(ep.labels)]
        owned.update(ep.key for ep in mine)
        groups.append((entry, [ep for ep in mine if ep.ready]))
    out: list[WeightedBackend] = []
    for prio in sorted({e.priority for e in entries}):
        out.extend(_tier_weights([(e, eps) for e, eps in groups if e.priority == prio]))
    return out


def active_tier(backends: Sequence[WeightedBackend]) -> list[WeightedBackend]:
    """The backends that take traffic while every endpoint is healthy."""
    if not backends:
        return []
    low = min(b.priority for b in backends)
    return [b for b in backends if b.priority == low]


def cluster_weights(backends: Sequence[WeightedBackend]) -> dict[str, int]:
    """Sum of endpoint weights per workload cluster (the control-plane hop's children)."""
    out: dict[str, int] = {}
    for b in backends:
        if b.endpoint.cluster is not None:
            out[b.endpoint.cluster] = out.get(b.endpoint.cluster, 0) + b.weight
    return dict(sorted(out.items()))


# --- adapters from modelplane.api models ---


def route_entries(service: ModelService | list[RouteEntry] | tuple[RouteEntry, ...]) -> list[RouteEntry]:
    """RouteEntry list from a ModelService model (or pass RouteEntry lists through)."""
    if isinstance(service, (list, tuple)):
        return list(service)
    out = []
    for i, e in enumerate(service.spec.endpoints):
        sel = getattr(e, "selector", None)
        labels = dict(getattr(sel, "match_labels", None) or {}) if sel is not None else {}
        policy = getattr(e, "routing_policy", None)
        out.append(
            RouteEntry(
                name=getattr(e, "name", None) or f"entry-{i}",
                weight=int(getattr(e, "weight", None) or 1),
                match_labels=labels,
                priority=int(getattr(e, "priority", None) or 0),
                weighting=getattr(policy, "weighting", None) or EVEN,
            )
        )
    return out


def _secret_ref(spec: Any) -> Any:
    """The API key's Secret reference in any of the shapes the API accepts:
    `credential.apiKey.secretRef`, `credentialRef`, or an object already reduced to it."""
    ref = getattr(spec, "api_key_secret", None)
    if ref is not None:
        return ref
    for attr in ("credential_ref", "credential"):
        c = getattr(spec, attr, None)
        nested = getattr(getattr(c, "api_key", None), "secret_ref", None)
        if nested is not None or getattr(c, "name", None):
            return nested or c
    return None


def endpoint_from_api(obj: ModelEndpoint, *, ready: bool = True) -> Endpoint:
    """Endpoint from a hand-written ModelEndpoint (v0.3.1 url/rewritePath or newer origin/api)."""
    md, spec = obj.metadata, obj.spec
    origin = getattr(spec, "origin", None)
    api = getattr(spec, "api", None)
    schema = "OpenAI"
    if origin:
        prefix = getattr(api, "prefix", None) or "/v1"
        schema = getattr(api, "schema_", None) or "OpenAI"
        url = origin.rstrip("/")
    else:
        # v0.3.1: the service prefix is replaced by rewritePath and callers address
        # `/v1/...` below the service, so the provider sees rewritePath + "v1/...".
        prefix = (getattr(spec, "rewrite_path", None) or "/").rstrip("/") + "/v1"
        parts = urlsplit(spec.url or "")   # the model requires url when origin is unset
        url = f"{parts.scheme}://{parts.netloc}"
    secret = _secret_ref(spec)
    cred = Credential(secret.name, getattr(secret, "key", None) or "apiKey") if secret else None
    return Endpoint(
        namespace=md.namespace or "default",
        name=md.name,
        labels=dict(getattr(md, "labels", None) or {}),
        url=url,
        api_prefix=prefix,
        ready=ready,
        external=True,
        credential=cred,
        api_schema=str(schema),
    )


def service_weights(service: ModelService | list[RouteEntry] | tuple[RouteEntry, ...], endpoints: Iterable[Endpoint]
                    ) -> list[WeightedBackend]:
    """Design-contract entry point: a ModelService (model or entry list) -> backends."""
    ns = None
    md = getattr(service, "metadata", None)
    if md is not None:
        ns = getattr(md, "namespace", None) or "default"
    return compute_weights(route_entries(service), endpoints, namespace=ns)


def replica_endpoint(
    namespace: str,
    replica: str,
    deployment: str,
    cluster: str,
    index: int,
    template_labels: Mapping[str, str] | None = None,
    url: str = "",
    *,
    ready: bool = True,
    capacity: int = 1,
) -> Endpoint:
    """The endpoint a placed replica gets (reference §4.1: template + managed labels)."""
    labels = dict(template_labels or {})
    labels.update(
        {DEPLOYMENT_LABEL: deployment, CLUSTER_LABEL: cluster, REPLICA_INDEX_LABEL: str(index)}
    )
    return Endpoint(namespace, replica, labels, url=url, ready=ready, capacity=capacity)


def serving_capacity(deployment: ModelDeployment) -> int:
    """Engine copies that answer requests in one replica of a ModelDeployment: every
    engine's copies under Unified serving, the Decode engine's under PrefillDecode
    (requests enter through the decode side). What `weighting: Capacity` weighs."""
    spec = deployment.spec.template.spec
    engines = list(getattr(spec, "engines", None) or [])
    mode = getattr(getattr(spec, "serving", None), "mode", None) or "Unified"
    if mode == "PrefillDecode":
        engines = [e for e in engines if getattr(e, "phase", None) == "Decode"] or engines
    return max(1, sum(int(getattr(e, "copies", None) or 1) for e in engines))
