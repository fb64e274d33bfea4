"""The placement as people read it: the table `plan` prints and `pulumi preview` logs, one
message per shortfall, and the per-deployment summary the program exports. Pure
formatting of the typed placement; one home for `plan` and the Pulumi program."""

from __future__ import annotations

from collections.abc import Sequence

from modelplane.json_types import JsonObject

from . import policy_report
from .ledger import DEFAULT_ACCOUNTING
from .placement_types import DeploymentPlacement, FleetPlacement, PlacedReplica
from .refusals import refusal_lines


def _engines(replica: PlacedReplica) -> str:
    parts = []
    for name, e in replica.engines.items():
        members = set(e.member_pools) - {e.pool}
        spans = f" (members {'+'.join(e.member_pools)})" if members else ""
        parts.append(f"{name}->{e.pool}{spans}")
    return ", ".join(parts)


def _rows(header: tuple[str, ...], rows: Sequence[tuple[str, ...]], indent: str) -> list[str]:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    return [indent + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
            for r in [header, *rows]]


def _claims(replica: PlacedReplica) -> str:
    """`engine[member]: count x DeviceClass` per DRA request a member's pods claim (`-o wide`)."""
    parts = [f"{name}[{m}]: {q.count}x {q.device_class_name or '?'}"
             for name, e in replica.engines.items() for m, member in enumerate(e.requests) for q in member]
    return ", ".join(parts) or "-"


def _zones(replica: PlacedReplica) -> str:
    return ", ".join(f"{name}: {'+'.join(dict.fromkeys(e.zones))}" for name, e in replica.engines.items()
                     if e.zones) or "-"


def format_table(placement: FleetPlacement, accounting: str = DEFAULT_ACCOUNTING, *, wide: bool = False) -> str:
    """Every deployment: replicas placed of desired, conditions, each replica's cluster and
    engine pools (`wide`: also the devices each member's pods claim and the zones of gang copies),
    previous replicas not kept, and why the clusters refused the rest (the summary: one line
    per refusal, scheduler.refusals)."""
    out = [f"accounting: {accounting}"]
    if not placement.deployments:
        out.append("no ModelDeployments")
    for d in placement.deployments:
        out.append("")
        out.append(f"{d.namespace}/{d.name}: {policy_report.placed(d)} of {d.desired} replicas placed"
                   f"{policy_report.surge_note(d)}")
        for c in d.conditions:
            out.append(f"  {c.type}={c.status} {c.reason}: {c.message}")
        if d.replicas:
            header: tuple[str, ...] = ("REPLICA", "CLUSTER", "INDEX", "ENGINE->POOL")
            rows = [(r.name, r.cluster, str(r.index), _engines(r)) + ((_claims(r), _zones(r)) if wide else ())
                    for r in d.replicas]
            out += _rows(header + (("CLAIMS", "ZONES") if wide else ()), rows, "  ")
        out += policy_report.deployment_lines(d)
        for rep, why in d.dropped:
            out.append(f"  not kept: {rep.name} ({rep.cluster}#{rep.index}): {why.message}")
        first = None
        for u in d.unplaced:
            out.append(f"  unplaced replica #{u.index}:{policy_report.verdict(u)}")
            if first is not None and u.refusals == first.refusals:
                out.append(f"    refused as #{first.index}")
                continue
            first = u
            out += [f"    {line}" for line in refusal_lines(u.refusals)]
    out += policy_report.budget_lines(placement)
    return "\n".join(out) + "\n"


def explanations(d: DeploymentPlacement) -> list[str]:
    """One line per replica that could not be placed, naming each cluster's reason."""
    lines = []
    for unplaced in d.unplaced:
        reasons = "; ".join(refusal_lines(unplaced.refusals))
        lines.append(f"replica {unplaced.index} not placed:{policy_report.verdict(unplaced)}"
                     f"{';' if unplaced.feasibility else ''} {reasons or 'no candidate cluster'}")
    return lines


def shortfalls(placement: FleetPlacement) -> list[str]:
    """One message per deployment with fewer replicas placed than desired."""
    out = []
    for d in placement.deployments:
        if policy_report.placed(d) >= d.desired:
            continue
        lines = [f"ModelDeployment {d.namespace}/{d.name}: {policy_report.placed(d)} of {d.desired} replicas placed"]
        lines += [f"  {line}" for line in explanations(d)]
        out.append("\n".join(lines))
    return out


def replica_summary(d: DeploymentPlacement) -> list[JsonObject]:
    return [{"name": r.name, "index": r.index, "cluster": r.cluster,
             "pools": {e: list(p.member_pools) or [p.pool] for e, p in sorted(r.engines.items())}}
            for r in d.replicas]


def deployment_summary(d: DeploymentPlacement) -> JsonObject:
    """What the program exports per deployment (`pulumi stack output deployments`)."""
    out = {"desired": d.desired, "replicas": replica_summary(d),
           "conditions": [c.to_json() for c in d.conditions], "explanations": explanations(d)}
    return out | policy_report.summary(d)


def deployment_outputs(placement: FleetPlacement) -> dict[str, JsonObject]:
    return {f"{d.namespace}/{d.name}": deployment_summary(d) for d in placement.deployments}
