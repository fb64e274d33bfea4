"""What can go wrong reading a cluster, in three kinds the observer treats differently:

* `ConfigError`: our side is unusable (the kubeconfig, a token file, a credential plugin, a
  certificate). Nothing was asked of the cluster: it says nothing about the cluster's health.
* `NoAnswer`: the API server did not answer (refused, reset, timed out, or failing with 5xx).
  Only this is an outage.
* `BadAnswer`: the API server answered, but not with what was asked (401/403/404, a redirect,
  a body too large, too deep, not JSON, or objects of the wrong shape).

Messages never quote a credential; outside text in them went through modelplane.redact.
"""

from __future__ import annotations


class KubeError(Exception):
    """A cluster could not be read; the message says why and never quotes a credential."""


class ConfigError(KubeError):
    """The kubeconfig or a credential it names is unusable: nothing was sent to the cluster."""


class NoAnswer(KubeError):
    """The API server did not answer (in time), or answered that it is failing (HTTP 5xx)."""


class BadAnswer(KubeError):
    """The API server answered, but the answer cannot be used."""
