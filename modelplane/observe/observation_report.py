"""The observation as people read it: which capacity each cluster's placement used, cluster
health, and the verification of placed replicas. One home for `plan --observe`, `verify`, the
preview log and `pulumi up`'s warnings."""

from __future__ import annotations

import datetime
from collections.abc import Mapping

from modelplane.redact import outside_text

from .capacity import DECLARED, FleetCapacity, PoolCapacity
from .health import ClusterHealth
from .read import MAX_REASON
from .verify import Verification


def _pool(name: str, pool: PoolCapacity) -> str:
    if pool.source == DECLARED:
        return f"pool {name}: declared size ({outside_text(pool.reason)})"
    free = sum(sum(vec) for vec in pool.free)
    held = f", {pool.held} held by other claims" if pool.held else ""
    if pool.strays:
        held += (f" ({pool.strays} by modelplane pods of replicas outside the previous placement: "
                 "pass the placement that created them as --previous)")
    return (f"pool {name}: {len(pool.free)} node(s), {pool.devices} device(s){held}, "
            f"{free} free for this plan")


def _when(epoch: int) -> str:
    try:
        return datetime.datetime.fromtimestamp(epoch, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    except (OverflowError, OSError, ValueError):   # health records are checked on input; never a traceback
        return f"epoch {epoch}"


def capacity_lines(capacity: FleetCapacity, health: Mapping[str, ClusterHealth] | None = None) -> list[str]:
    """Per cluster: observed (each pool's nodes and devices) or declared (and why). Reasons,
    notes and health come from the clusters or from state: outside text (modelplane.redact)."""
    out = ["capacity:"]
    for name, cluster in sorted(capacity.clusters.items()):
        if cluster.source == DECLARED:
            out.append(f"  {name}: declared ({outside_text(cluster.reason, limit=MAX_REASON + 40)})")
        else:
            out.append(f"  {name}: observed")
            out += [f"    {_pool(p, c)}" for p, c in sorted(cluster.pools.items())]
            out += [f"    note: {outside_text(n)}" for n in cluster.notes]
        h = (health or {}).get(name)
        if h is not None:
            out.append(f"    health: {h.condition} since {_when(h.since)}: {outside_text(h.reason, limit=MAX_REASON)}")
    return out


def format_capacity(capacity: FleetCapacity, health: Mapping[str, ClusterHealth] | None = None) -> str:
    return "\n".join(capacity_lines(capacity, health)) + "\n"


def format_verification(report: Verification, *, wide: bool = False) -> str:
    """One line per placed replica (`wide`: with its index and problem count), its problems
    under it, then the verdict."""
    rows = [("REPLICA", "DEPLOYMENT", "CLUSTER", "STATUS", "PODS") + (("INDEX", "PROBLEMS") if wide else ())]
    rows += [(r.replica, f"{r.namespace}/{r.deployment}", r.cluster, r.status, f"{r.pods}/{r.expected}")
             + ((str(r.index), str(len(r.problems))) if wide else ()) for r in report.replicas]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    out = []
    for i, row in enumerate(rows):
        out.append("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
        if i:
            out += [f"  - {outside_text(p)}" for p in report.replicas[i - 1].problems]
    out += [f"stray: {outside_text(s)} (no replica of the placement)" for s in report.strays]
    out.append(("OK: " if report.ok else "MISMATCH: ") + outside_text(report.summary(), limit=2000))
    return "\n".join(out) + "\n"
