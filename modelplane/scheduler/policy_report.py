"""Lines the placement policies add to the `plan` table: one place, so the
CLI and the Pulumi preview print the same words."""

from __future__ import annotations

from modelplane.json_types import JsonObject

from .placement_types import DeploymentPlacement, FleetPlacement, Unplaced


def verdict(u: Unplaced) -> str:
    """` <Verdict>: <message>` for an unplaced replica, or ''."""
    f = u.feasibility
    return f" {f.verdict}: {f.message}" if f is not None else ""


def placed(d: DeploymentPlacement) -> int:
    """Replicas counted against spec.replicas: the new half of a move is extra."""
    return len(d.replicas) - (len(d.policy.moves) if d.policy is not None else 0)


def surge_note(d: DeploymentPlacement) -> str:
    moving = len(d.replicas) - placed(d)
    return f" (+{moving} moving back)" if moving else ""


def deployment_lines(d: DeploymentPlacement, indent: str = "  ") -> list[str]:
    """Tiers and moves of a deployment under clusterPreferences."""
    p = d.policy
    if p is None or not p.tiers:
        return []
    by_tier: dict[str, list[str]] = {}
    for replica, tier in p.tiers.items():           # most preferred tier first
        by_tier.setdefault(tier, []).append(replica)
    out = [indent + "tiers: " + "; ".join(f"{t}: {', '.join(rs)}" for t, rs in by_tier.items())]
    for m in p.moves:
        out.append(f"{indent}moving back: {m.from_} ({m.from_tier}) -> {m.to} ({m.to_tier}); "
                   f"{m.from_} is removed once {m.to} is ready")
    if p.return_streak:
        out.append(f"{indent}a more preferred tier has had room for {p.return_streak} consecutive plan(s)")
    return out


def budget_lines(fp: FleetPlacement) -> list[str]:
    if not fp.budgets:
        return []
    rows = [("FLEETBUDGET", "MAX", "USED", "REFUSED", "DEPLOYMENTS")]
    rows += [(b.name, str(b.max_devices), str(b.used), str(b.refused), ", ".join(b.deployments) or "-")
             for b in fp.budgets]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    out = [""] + ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    for b in fp.budgets:
        c = b.condition
        if c is not None and c.status == "False":
            out.append(f"  {b.name}: {c.type}={c.status} {c.reason}: {c.message}")
    return out


def summary(d: DeploymentPlacement) -> JsonObject:
    """What a deployment's stack output adds under a policy: its placementPolicy block
    and the verdict of every unplaced replica (empty when there is neither)."""
    out: JsonObject = {}
    block = d.policy.to_json() if d.policy is not None else {}
    if block:
        out["placementPolicy"] = block
    if any(u.feasibility for u in d.unplaced):
        out["feasibility"] = [u.feasibility.to_json() for u in d.unplaced if u.feasibility]
    return out
