"""`plan --metrics FILE`: what the autoscalers would do at these numbers, without a cluster,
as `plan` prints it.

The pass is modelplane.reconcile_pass.first_decision (a first decision for every
ReplicaAutoscaler, no history, placed by the scheduler at the decided counts); this module
words it. The plan's table gets an autoscaling section; `--json` gets a top-level
`autoscaling` list, only when the fleet has an autoscaler, so a plan without one prints
exactly what it printed before.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from modelplane.json_types import JsonObject
from modelplane.scheduler import FleetPlacement
from modelplane.scheduler.placement_report import format_table

from .scaled_placement import ScalingOutcome

AUTOSCALING_KEY = "autoscaling"


def format_plan(placement: FleetPlacement, document: JsonObject, outcomes: Sequence[ScalingOutcome], path: str,
                accounting: str, *, as_json: bool) -> str:
    """The plan's output: `document` (the placement's JSON, extended in place) with the
    outcomes, or the table of `placement` with the autoscaling section."""
    if as_json:
        if outcomes:
            document[AUTOSCALING_KEY] = [o.to_json() for o in outcomes]
        return json.dumps(document, separators=(",", ":")) + "\n"
    table = format_table(placement, accounting)
    return table + ("\n" + format_scaling(outcomes, path) if outcomes else "")


def format_scaling(outcomes: Sequence[ScalingOutcome], path: str) -> str:
    lines = [f"AUTOSCALING at the numbers in {path} (a first decision: no history)"]
    for o in outcomes:
        d = o.decision
        scaler = f"{o.autoscaler.metadata.namespace}/{o.autoscaler.name}"
        change = (f"{d.current} -> {d.desired} replicas" if d.desired != d.current
                  else f"{d.current} replicas, no change")
        lines.append(f"{o.target[0]}/{o.target[1]} (ReplicaAutoscaler {scaler}): {change}, {o.placed} placed: "
                     f"{d.reason}")
        for m in d.metrics:
            if m.error is not None:
                lines.append(f"  {m.type}: unreadable: {m.error}")
            else:
                lines.append(f"  {m.type}: {m.average:g} (target {m.target:g}) -> {m.proposal}")
        lines.extend(f"  {x.type}={x.status} {x.reason}: {x.message}" for x in o.conditions())
    return "\n".join(lines) + "\n"


__all__ = ["AUTOSCALING_KEY", "format_plan", "format_scaling"]
