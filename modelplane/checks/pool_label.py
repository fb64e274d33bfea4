"""pool-label-on-existing-clusters: pods are pinned by node label modelplane.ai/pool; on a
cluster the program doesn't provision, somebody must set it (mission: silent failure 6)."""

from __future__ import annotations

from collections.abc import Iterable

from modelplane.vocabulary import LABEL_POOL as POOL_LABEL

from .context import CheckContext
from .findings import MANDATORY, Finding
from .registry import register

POLICY = "pool-label-on-existing-clusters"


@register(POLICY, MANDATORY, "Existing clusters' pools must be labelled by the program or "
          "declare that their nodes carry modelplane.ai/pool")
def check(ctx: CheckContext) -> Iterable[Finding]:
    for cluster in ctx.fleet.clusters.values():
        if cluster.spec.cluster.source != "Existing":
            continue
        for i, pool in enumerate(cluster.spec.node_pools):
            if not pool.is_gpu_pool or pool.pool_label is not None:
                continue
            yield Finding(
                POLICY, MANDATORY, ctx.ref(cluster), f"spec.nodePools[{i}].poolLabel",
                f"pool {pool.name!r} is on an Existing cluster, whose nodes nobody labels "
                f"{POOL_LABEL}={pool.name}: every pod placed on it stays Pending without an "
                f"error. Fix: add poolLabel: {{mode: Apply, nodeSelector: {{matchLabels: {{...}}}}}} "
                f"so the program labels the nodes that match, or poolLabel: {{mode: Present}} if "
                f"the nodes already carry {POOL_LABEL}={pool.name}.",
            )
