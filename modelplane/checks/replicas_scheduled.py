"""replicas-fully-scheduled: a deployment below spec.replicas fails the preview, partial
shortfall included (mission: silent failure 5; the reference reports True for it)."""

from __future__ import annotations

from collections.abc import Iterable

from modelplane.scheduler.placement_types import DeploymentPlacement
from modelplane.scheduler.refusals import refusal_lines

from .context import CheckContext
from .findings import MANDATORY, Finding
from .registry import register

POLICY = "replicas-fully-scheduled"


def _explain(placed: DeploymentPlacement) -> str:
    lines = []
    for unplaced in placed.unplaced:
        reasons = "; ".join(refusal_lines(unplaced.refusals))
        lines.append(f"replica {unplaced.index}: {reasons or 'no candidate cluster'}")
    return " | ".join(lines)


@register(POLICY, MANDATORY, "Every replica of every deployment must be placed",
          needs_placement=True)
def check(ctx: CheckContext) -> Iterable[Finding]:
    if ctx.placement is None:
        return
    for placed in ctx.placement.deployments:
        dep = ctx.fleet.deployments.get((placed.namespace, placed.name))
        cond = placed.condition("ReplicasScheduled")
        if dep is None or cond is None or cond.status != "False":
            continue
        why = _explain(placed)
        yield Finding(
            POLICY, MANDATORY, ctx.ref(dep), "spec.replicas",
            f"{len(placed.replicas)} of {placed.desired} replicas placed (ReplicasScheduled=False, "
            f"{cond.reason}: {cond.message})" + (f". Scheduler: {why}" if why else "") +
            ". `pulumi up` would run it below spec.replicas without an error. Fix: add capacity "
            "to an eligible pool (nodeCount), widen clusterSelector or the device selectors, "
            "tolerate the taints in the way, or lower spec.replicas.",
        )
