"""The one Kubernetes client: kubeconfigs through lightkube (modelplane.kube.config), requests
bounded in time, bytes, depth and type (modelplane.kube.client).

The observer (modelplane.observe) reads clusters with it; the simulated clusters
(`sim.KubeClient`) build on it to create their nodes and slices. Errors come in three kinds
(modelplane.kube.errors): ConfigError (our side: nothing was asked), NoAnswer (an outage),
BadAnswer (the server answered unusably). docs/design.md, "The Kubernetes client", says which
parts are lightkube's and which are ours, and why.
"""

from modelplane.json_types import JsonObject
from modelplane.urls import header_safe

from .client import PAGE_SIZE, Answer, KubeClient, decode
from .config import DEFAULT_TIMEOUT_S, KubeAccess, load_kubeconfig
from .errors import BadAnswer, ConfigError, KubeError, NoAnswer

__all__ = ["DEFAULT_TIMEOUT_S", "PAGE_SIZE", "Answer", "BadAnswer", "ConfigError", "JsonObject", "KubeAccess",
           "KubeClient", "KubeError", "NoAnswer", "decode", "header_safe", "load_kubeconfig"]
