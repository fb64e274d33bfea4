"""`plan --metrics FILE`: what the autoscalers would do at these numbers, without a cluster.

A first decision for every ReplicaAutoscaler (no history: stabilization applies from the
second decision on, in the loop: modelplane.autoscale.loop), placed by the scheduler at the
decided counts.
The plan's table gets an autoscaling section; `--json` gets a top-level `autoscaling`
list, only when the fleet has an autoscaler, so a plan without one prints exactly what
it printed before.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping

from modelplane.api import Fleet
from modelplane.scheduler import FleetPlacement
from modelplane.scheduler.report import format_table

from .placement import ScalingOutcome, decide_fleet, place_decisions
from .readings import FileMetricsSource

Key = tuple[str, str]
AUTOSCALING_KEY = "autoscaling"


def plan_metrics(fleet: Fleet, values: Mapping[Key, Mapping[str, float]], path: str,
                 previous: FleetPlacement | None, accounting: str, observed: Mapping[str, Mapping[str, int]] | None,
                 *, as_json: bool, now: float | None = None) -> str:
    """The plan's output at the metrics in `values` (read from `path` by
    commands.inputs.read_metrics). ValueError when an entry names a deployment without
    an autoscaler, or a metric its autoscaler does not use."""
    source = FileMetricsSource(values, f"metrics file {path}")
    source.check_against(fleet.autoscalers)
    decisions = decide_fleet(fleet, source, time.time() if now is None else now, previous)
    placement, outcomes = place_decisions(fleet, decisions, previous, accounting,
                                          dict(observed) if observed is not None else None)
    if as_json:
        doc = placement.to_json()
        if outcomes:
            doc[AUTOSCALING_KEY] = [o.to_json() for o in outcomes]
        return json.dumps(doc, separators=(",", ":")) + "\n"
    table = format_table(placement, accounting)
    return table + ("\n" + format_scaling(outcomes, path) if outcomes else "")


def format_scaling(outcomes: list[ScalingOutcome], path: str) -> str:
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


__all__ = ["AUTOSCALING_KEY", "format_scaling", "plan_metrics"]
