"""ModelplaneFleet: the whole fleet, or one stack of a split fleet, as one component, so
`pulumi preview` shows one tree.

It places the fleet (the placement resource), turns the placement into typed objects
once and plans every cluster with the core (`modelplane.plan`); the other components only
register what that plan holds. Also the entry point for users who prefer code to stack
YAML (`deploy_fleet(FleetArgs(fleet=load_manifests(...)))`).

One class per role, as pulumi-eks has one per node-group variant, over the registration
helpers they share (base.py), all of the one Pulumi type `modelplane:index:ModelplaneFleet`
with the same resource names, so a stack keeps its URNs whichever class built it:
- one_stack.py: `args.split` None, everything in this stack;
- fleet_stack.py: the placement, each shard's share exported (docs/pulumi-program.md,
  "Split stacks");
- shard_stack.py: one shard's clusters from its share; the shard hosting the control-plane
  gateway also registers the gateway, the services and the hand-written endpoints.
"""

from __future__ import annotations

from components.args import FLEET_ROLE, FleetArgs

from .base import TYPE, WAS_TOP_LEVEL, ModelplaneFleet, control_spec
from .fleet_stack import FleetStackFleet
from .one_stack import OneStackFleet
from .shard_stack import ShardStackFleet

__all__ = ["TYPE", "WAS_TOP_LEVEL", "FleetStackFleet", "ModelplaneFleet", "OneStackFleet", "ShardStackFleet",
           "control_spec", "deploy_fleet", "fleet_class"]


def fleet_class(args: FleetArgs) -> type[ModelplaneFleet]:
    """The role of this stack: one stack, the fleet stack or a shard stack of a split fleet."""
    if args.split is None:
        return OneStackFleet
    return FleetStackFleet if args.split.role == FLEET_ROLE else ShardStackFleet


def deploy_fleet(args: FleetArgs, name: str = "modelplane") -> ModelplaneFleet:
    return fleet_class(args)(name, args)
