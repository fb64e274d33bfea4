"""Pure renderers: placed replicas and caches -> Kubernetes manifests as plain dicts.

Nothing here talks to a cluster or imports Pulumi; the same dicts feed `render` (YAML
files) and the Pulumi components.
"""

from .cache import cache_storage_class, render_cache
from .fleet import render_cluster_manifests
from .meta import RenderError
from .mock_engine import render_mock_engine_configmap, ships_mock_engine
from .namespace import render_namespace
from .replica import render_replica

__all__ = [
    "RenderError",
    "cache_storage_class",
    "render_cache",
    "render_cluster_manifests",
    "render_mock_engine_configmap",
    "render_namespace",
    "render_replica",
    "ships_mock_engine",
]
