"""The whole declared fleet: every validated manifest, indexed by kind and key."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .common import KindObject
from .inference_class import InferenceClass
from .inference_cluster import InferenceCluster
from .inference_gateway import InferenceGateway
from .model_cache import ModelCache
from .model_deployment import ModelDeployment
from .model_endpoint import ModelEndpoint
from .model_service import ModelService
from .placement_policy import FleetBudget
from .replica_autoscaler import ReplicaAutoscaler

Key = tuple[str, str]


@dataclass
class Fleet:
    classes: dict[str, InferenceClass] = field(default_factory=dict)
    clusters: dict[str, InferenceCluster] = field(default_factory=dict)
    gateways: dict[str, InferenceGateway] = field(default_factory=dict)
    caches: dict[Key, ModelCache] = field(default_factory=dict)
    deployments: dict[Key, ModelDeployment] = field(default_factory=dict)
    services: dict[Key, ModelService] = field(default_factory=dict)
    endpoints: dict[Key, ModelEndpoint] = field(default_factory=dict)
    budgets: dict[str, FleetBudget] = field(default_factory=dict)
    autoscalers: dict[Key, ReplicaAutoscaler] = field(default_factory=dict)
    sources: dict[tuple[str, object], str] = field(default_factory=dict)
    # Whether a ModelService is balanced CacheAware, once known: every cluster's plan asks, and a
    # scan of the services per cluster is quadratic at fleet scale. `add` forgets it.
    _cache_aware: bool | None = field(default=None, init=False, repr=False, compare=False)

    def _tables(self) -> dict[str, dict[Any, Any]]:
        # One table per kind, in document order. Any: a table is keyed by name or by
        # (namespace, name) and holds that kind's model, both chosen by the kind at run time.
        return {
            "InferenceClass": self.classes,
            "InferenceCluster": self.clusters,
            "InferenceGateway": self.gateways,
            "ModelCache": self.caches,
            "ModelDeployment": self.deployments,
            "ModelService": self.services,
            "ModelEndpoint": self.endpoints,
            "FleetBudget": self.budgets,
            "ReplicaAutoscaler": self.autoscalers,
        }

    def _table(self, kind: str) -> dict[Any, Any]:
        return self._tables()[kind]

    def add(self, obj: KindObject, source: str) -> None:
        self._table(obj.kind)[obj.key] = obj
        self.sources[(obj.kind, obj.key)] = source
        if obj.kind == "ModelService":
            self._cache_aware = None

    def contains(self, obj: KindObject) -> bool:
        return obj.key in self._table(obj.kind)

    def source_of(self, obj: KindObject) -> str:
        """Where a manifest came from, e.g. 'examples/kind/fleet.yaml#2'."""
        return self.sources.get((obj.kind, obj.key), "<unknown>")

    def objects(self) -> list[KindObject]:
        out: list[KindObject] = []
        for table in self._tables().values():
            out.extend(table[k] for k in sorted(table))
        return out

    def to_documents(self) -> list[dict[str, Any]]:
        """Every manifest by alias, in a stable order: how the fleet travels through Pulumi inputs."""
        return [obj.to_manifest() for obj in self.objects()]

    def sort(self) -> Fleet:
        for name in ("classes", "clusters", "gateways", "caches", "deployments", "services", "endpoints", "budgets",
                     "autoscalers"):
            table = getattr(self, name)
            setattr(self, name, {k: table[k] for k in sorted(table)})
        return self

    def control_gateway(self) -> InferenceGateway | None:
        """The gateway the program deploys: v0.3.1's singleton `default`, else the only one."""
        if "default" in self.gateways:
            return self.gateways["default"]
        return next(iter(self.gateways.values())) if len(self.gateways) == 1 else None

    def cache_aware(self) -> bool:
        """A ModelService of the fleet is balanced CacheAware: every gateway loads kvroute (placement-free,
        as the gateways' Deployments are; a gateway serving none of those services loads it unused)."""
        if self._cache_aware is None:
            self._cache_aware = any(svc.spec.cache_aware for svc in self.services.values())
        return self._cache_aware

    def cache_for(self, deployment: ModelDeployment) -> ModelCache | None:
        ref = deployment.spec.template.spec.model_cache_ref
        return self.caches.get((deployment.metadata.namespace or "default", ref.name)) if ref else None

    def autoscaler_for(self, key: Key) -> ReplicaAutoscaler | None:
        """The ReplicaAutoscaler scaling the deployment `key` (the loader allows one at most)."""
        return next((a for a in self.autoscalers.values() if a.target_key == key), None)
