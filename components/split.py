"""The Pulumi side of a fleet split across stacks (docs/pulumi-program.md, "Split stacks"):
where a shard stack's share comes from and how one stack reaches another's outputs.

The core decides what a share holds (modelplane.plan.share); this module only moves it:
the fleet stack exports every share as JSON text (a stack output of strings: an Output's
dict would be lifted into an Output per nested value), a shard stack reads its own
through a StackReference to the fleet stack, or from the file `python -m modelplane
preview` hands both (the placement being previewed is not in any stack's outputs yet).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping

import pulumi

from components.args import SplitArgs
from components.errors import ResourceError
from modelplane.api import Fleet
from modelplane.gateway.config import ServiceRoute
from modelplane.json_types import JsonMapping
from modelplane.plan import ControlPlan, FleetPlan, PlanError
from modelplane.plan.share import Share, StackLayout, fleet_shares, plan_shard
from modelplane.render import RenderError
from modelplane.scheduler import FleetPlacement

SHARES_OUTPUT = "shares"
LAYOUT_OUTPUT = "layout"
GATEWAY_URLS_OUTPUT = "gatewayUrls"


def shard_stack(fleet_stack: str, shard: str) -> str:
    """A shard stack's name: the fleet stack's, a dot, the shard's (`prod.eu-west`)."""
    return f"{fleet_stack}.{shard}"


def shares_text(fleet: Fleet, placement: FleetPlacement, layout: StackLayout,
                routes: tuple[ServiceRoute, ...]) -> dict[str, str]:
    """Every shard's share as JSON text, the fleet stack's `shares` output."""
    shares = fleet_shares(fleet, placement, layout.shards, layout.control, routes)
    return {shard: json.dumps(share.to_json(), separators=(",", ":")) for shard, share in shares.items()}


def write_shares_file(path: str, shares: Mapping[str, str], layout: StackLayout) -> None:
    """The fleet stack's outputs a preview would have exported: shares and layout."""
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump({SHARES_OUTPUT: dict(shares), LAYOUT_OUTPUT: layout.to_json()}, fh)
    os.replace(tmp, path)


def _share_text(outputs: JsonMapping | None, split: SplitArgs, parent: pulumi.Resource) -> str:
    text = ((outputs or {}).get(SHARES_OUTPUT) or {}).get(split.shard)
    if not isinstance(text, str):
        where = split.shares_file or f"the outputs of stack {split.fleet_stack}"
        raise ResourceError(f"no share for shard {split.shard} in {where}: apply the fleet stack first "
                            "(`python -m modelplane up`), and check split.shard against its `layout` output",
                            parent)
    return text


def shard_plan(fleet: Fleet, split: SplitArgs, control: ControlPlan, parent: pulumi.Resource
               ) -> pulumi.Output[FleetPlan]:
    """A shard stack's plan: its clusters' ClusterPlans (exactly those `plan_fleet` makes)
    and, when it hosts the control-plane gateway, every route."""

    def plan(text: str) -> FleetPlan:
        try:
            share = Share.from_json(json.loads(text))
            clusters = plan_shard(fleet, share)
        except (PlanError, RenderError, ValueError) as exc:
            raise ResourceError(str(exc), parent) from None
        return FleetPlan(share.placement, clusters, share.control_routes or (), control)

    if split.shares_file:
        try:
            with open(split.shares_file, encoding="utf-8") as fh:
                outputs = json.load(fh)
        except (OSError, ValueError) as exc:
            raise ResourceError(f"cannot read the shares file {split.shares_file}: {exc}", parent) from None
        return pulumi.Output.from_input(_share_text(outputs, split, parent)).apply(plan)
    ref = pulumi.StackReference(split.fleet_stack, opts=pulumi.ResourceOptions(parent=parent))
    return ref.outputs.apply(lambda outputs: _share_text(outputs, split, parent)).apply(plan)


def other_gateway_urls(split: SplitArgs, shard: str, parent: pulumi.Resource) -> pulumi.Output[Mapping[str, str]]:
    """The workload gateway URLs another shard stack exported (its LoadBalancers' addresses):
    the control-plane gateway's routes need them, so its shard runs after the others."""
    name = shard_stack(split.fleet_stack, shard)
    ref = pulumi.StackReference(name, opts=pulumi.ResourceOptions(parent=parent))
    return ref.outputs.apply(lambda outputs: dict((outputs or {}).get(GATEWAY_URLS_OUTPUT) or {}))
