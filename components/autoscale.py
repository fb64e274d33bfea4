"""The program's side of autoscaling (docs/autoscaling.md): stack config `modelplane:autoscale`
-> the placement resource's `autoscale` input (providers/autoscale.py checks it), and what
`pulumi preview` and `up` log and export about it: each autoscaler's count, why it last
changed, and the replicas draining."""

from __future__ import annotations

import datetime
import os
from collections.abc import Mapping
from typing import Any

import pulumi

from modelplane.api import Fleet
from modelplane.autoscale.loop import METRICS_FILE_ENV
from modelplane.autoscale.state import ScalingState

CONFIG_KEYS = ("metricsFile", "prometheus", "timeoutSeconds", "ttftWindowSeconds", "prometheusWindow",
               "drainSeconds", "drainGraceSeconds")


def autoscale_input(fleet: Fleet, config: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The `autoscale` input of a fleet that has a ReplicaAutoscaler (None otherwise: a fleet
    without one places exactly as before). Unknown keys are errors naming them."""
    if not fleet.autoscalers:
        return None
    block = dict(config or {})
    unknown = sorted(set(block) - set(CONFIG_KEYS))
    if unknown:
        raise pulumi.RunError(f"stack config autoscale: unknown key(s) {', '.join(unknown)}; known: "
                              f"{', '.join(CONFIG_KEYS)}")
    override = os.environ.get(METRICS_FILE_ENV)
    if override:
        block["metricsFile"] = override
    return block


def _when(at: float) -> str:
    return datetime.datetime.fromtimestamp(at, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def format_autoscaling(state: ScalingState) -> str:
    """The autoscaling section `pulumi preview` and `up` log under the placement table."""
    lines = ["autoscaling:"]
    for (ns, name), s in sorted(state.autoscalers.items()):
        line = f"  {ns}/{name}: {s.replicas} replica(s)"
        if s.last_scale is not None:
            last = s.last_scale
            line += f"; last scaled {last.from_} -> {last.to} at {_when(last.at)}: {last.reason}: {last.message}"
        if s.held is not None:
            line += f"; held: {s.held.reason}: {s.held.message}"
        lines.append(line)
    for d in state.draining:
        lines.append(f"  {d.namespace}/{d.deployment}: replica {d.replica.name} on {d.replica.cluster} is out of the "
                     f"routes since {_when(d.since)}, draining; deleted once drained")
    return "\n".join(lines)


def autoscaling_output(state: ScalingState) -> dict[str, Any]:
    """The `autoscaling` stack output: what people read (the histories stay in the state)."""
    return {"autoscalers": {f"{ns}/{name}": {"replicas": s.replicas,
                                             **({"lastScale": s.last_scale.to_json()} if s.last_scale else {}),
                                             **({"held": s.held.to_json()} if s.held else {})}
                            for (ns, name), s in sorted(state.autoscalers.items())},
            "draining": [{"namespace": d.namespace, "deployment": d.deployment, "replica": d.replica.name,
                          "cluster": d.replica.cluster, "since": d.since} for d in state.draining]}


__all__ = ["autoscale_input", "autoscaling_output", "format_autoscaling"]
