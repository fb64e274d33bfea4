"""Pure renderers: placed replicas, caches and the platform's own objects -> Kubernetes
manifests as plain dicts.

Nothing here talks to a cluster or imports Pulumi; which object lands on which cluster is
decided once, by `modelplane.plan`, for `render`, `demo` and the Pulumi components alike.
"""

from modelplane.vocabulary import Manifest

from .cache import render_cache
from .meta import RenderError
from .mock_engine_configmap import render_mock_engine_configmap, ships_mock_engine
from .namespace import render_namespace, render_system_namespace
from .replica import render_replica

__all__ = [
    "Manifest",
    "RenderError",
    "render_cache",
    "render_mock_engine_configmap",
    "render_namespace",
    "render_replica",
    "render_system_namespace",
    "ships_mock_engine",
]
