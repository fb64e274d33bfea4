"""How long `pulumi up` waits for a workload to become ready: what the workload needs, not an
hour for every Deployment.

pulumi-kubernetes awaits a Deployment until its pods are ready and a Job until it completes,
for the time its `pulumi.com/timeoutSeconds` annotation says (pulumi/pulumi-kubernetes#457,
"Add configurable timeouts for complex awaiters"; a `customTimeouts` resource option takes
precedence, pulumi/pulumi-kubernetes#672, which the sim stack's tighter budget uses). A pod the
scheduler cannot place then fails `up` within its budget instead of holding it; the reason is
in the pod's events and in the `verification` output when the stack observes its clusters.

The budgets are generous bounds, not estimates: image pull and engine start on a node the
cluster-autoscaler may still have to add, plus, for an engine reading a ModelCache, the staging
the engine's init container waits for and the read of the weights.
"""

from __future__ import annotations

from modelplane.vocabulary import Manifest

TIMEOUT_ANNOTATION = "pulumi.com/timeoutSeconds"
# A GPU node the cluster-autoscaler adds (minutes), a multi-GB engine image pulled onto it, the
# engine's start and its readiness probe's 30 s initial delay.
ENGINE_START_S = 20 * 60
# The staging Job: the image pull and the Hub's first response, then the download at >= ~50 MiB/s.
STAGING_BASE_S = 10 * 60
STAGING_S_PER_GIB = 20
# An engine reading its weights from the cache volume at >= ~500 MiB/s.
LOAD_S_PER_GIB = 2


def staging_timeout_s(size_gib: int) -> int:
    return STAGING_BASE_S + STAGING_S_PER_GIB * size_gib


def engine_timeout_s(cache_size_gib: int | None) -> int:
    """An engine Deployment's budget; with a cache it includes the staging it waits for."""
    if cache_size_gib is None:
        return ENGINE_START_S
    return ENGINE_START_S + staging_timeout_s(cache_size_gib) + LOAD_S_PER_GIB * cache_size_gib


def with_timeout(obj: Manifest, seconds: int) -> Manifest:
    """`obj` with its readiness budget in its annotations (other annotations kept)."""
    meta = obj["metadata"]
    meta["annotations"] = dict(sorted({**meta.get("annotations", {}), TIMEOUT_ANNOTATION: str(seconds)}.items()))
    return obj
