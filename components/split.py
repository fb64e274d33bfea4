"""The Pulumi side of a fleet split across stacks (docs/pulumi-program.md, "Split stacks"):
where a shard stack's share comes from and how one stack reaches another's outputs.

The core decides what a share holds (modelplane.plan.share); this module only moves it:
the fleet stack exports every share as JSON text (a stack output of strings: an Output's
dict would be lifted into an Output per nested value), a shard stack reads its own
through a StackReference to the fleet stack, or from the file `python -m modelplane
preview` hands both (the placement being previewed is not in any stack's outputs yet).
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.metadata
import json
import os
from collections.abc import Mapping
from pathlib import Path

import pulumi

from components.args import SplitArgs
from components.errors import ResourceError
from modelplane.api import Fleet
from modelplane.gateway.config import ServiceRoute
from modelplane.gateway.security import PLUGINS_DIR
from modelplane.json_types import JsonMapping
from modelplane.plan import ControlPlan, FleetPlan, PlanError
from modelplane.plan.share import FleetDigests, Share, StackLayout, fleet_shares, plan_shard, shard_digest
from modelplane.render import RenderError
from modelplane.scheduler import FleetPlacement

SHARES_OUTPUT = "shares"
LAYOUT_OUTPUT = "layout"
GATEWAY_URLS_OUTPUT = "gatewayUrls"
# A shard stack's record of what it applied: {"inputs": shard_inputs_digest, "fromConfig": ...};
# `python -m modelplane preview` previews only the shards whose record differs from the preview's.
APPLIED_OUTPUT = "applied"
DIGESTS_KEY = "digests"            # in the shares file: shard -> shard_inputs_digest of the previewed share
# What the program is made of, for program_digest: its packages and the SDKs that register resources.
PROGRAM_PACKAGES = ("components", "modelplane", "providers", "sim")
PROGRAM_DISTRIBUTIONS = ("pulumi", "pulumi-kubernetes", "pulumi-aws", "pulumi-gcp", "pulumi-command")


def shard_stack(fleet_stack: str, shard: str) -> str:
    """A shard stack's name: the fleet stack's, a dot, the shard's (`prod.eu-west`)."""
    return f"{fleet_stack}.{shard}"


def shares_text(fleet: Fleet, placement: FleetPlacement, layout: StackLayout,
                routes: tuple[ServiceRoute, ...]) -> dict[str, str]:
    """Every shard's share as JSON text, the fleet stack's `shares` output."""
    shares = fleet_shares(fleet, placement, layout.shards, layout.control, routes)
    return {shard: json.dumps(share.to_json(), separators=(",", ":")) for shard, share in shares.items()}


def program_files() -> list[Path]:
    """Every file the program makes a shard's objects from: the .py files of its packages
    and the project's __main__.py, and the gateway plugins' sources, which the renderer ships
    to each gateway in a ConfigMap (modelplane.render.gateway.plugin_files)."""
    here = Path(__file__).resolve().parent.parent
    roots = [Path(importlib.import_module(name).__file__ or "").parent for name in PROGRAM_PACKAGES]
    files = sorted(f for root in roots for f in root.rglob("*.py"))
    main = here / "__main__.py"
    plugins = sorted(f for f in (PLUGINS_DIR / "src").rglob("*") if f.is_file())
    return [*files, *([main] if main.exists() else []), *plugins]


@functools.cache
def program_digest() -> str:
    """The program's files (program_files) and the versions of the SDKs it registers
    resources with: a shard applied by another program is previewed, whatever its share."""
    h = hashlib.sha256()
    for f in program_files():
        h.update(f.name.encode())
        h.update(f.read_bytes())
    for dist in PROGRAM_DISTRIBUTIONS:
        try:
            h.update(f"{dist}={importlib.metadata.version(dist)}".encode())
        except importlib.metadata.PackageNotFoundError:
            h.update(f"{dist}=none".encode())
    return h.hexdigest()[:32]


def shard_inputs_digest(digests: FleetDigests, text: str, *, control: bool) -> str:
    """What a shard stack's objects are made from (modelplane.plan.share.shard_digest of its
    share text) and the program making them."""
    return hashlib.sha256(f"{shard_digest(digests, json.loads(text), control=control)}:{program_digest()}"
                          .encode()).hexdigest()[:32]


def applied_record(digest: str, from_config: str) -> dict[str, str]:
    """A shard stack's `applied` output."""
    return {"inputs": digest, "fromConfig": from_config}


def write_shares_file(path: str, shares: Mapping[str, str], layout: StackLayout,
                      digests: Mapping[str, str] | None = None) -> None:
    """The fleet stack's outputs a preview would have exported, shares and layout, and each
    shard's inputs digest (what the driver compares with the shard's `applied` output)."""
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump({SHARES_OUTPUT: dict(shares), LAYOUT_OUTPUT: layout.to_json(), DIGESTS_KEY: dict(digests or {})},
                  fh)
    os.replace(tmp, path)


def shares_digests(fleet: Fleet, shares: Mapping[str, str], layout: StackLayout) -> dict[str, str]:
    """Every shard's inputs digest of one placement's shares."""
    digests = FleetDigests(fleet)
    return {shard: shard_inputs_digest(digests, text, control=shard == layout.control)
            for shard, text in shares.items()}


def _share_text(outputs: JsonMapping | None, split: SplitArgs, parent: pulumi.Resource) -> str:
    text = ((outputs or {}).get(SHARES_OUTPUT) or {}).get(split.shard)
    if not isinstance(text, str):
        where = split.shares_file or f"the outputs of stack {split.fleet_stack}"
        raise ResourceError(f"no share for shard {split.shard} in {where}: apply the fleet stack first "
                            "(`python -m modelplane up`), and check split.shard against its `layout` output",
                            parent)
    return text


def shard_share_text(split: SplitArgs, parent: pulumi.Resource) -> pulumi.Output[str]:
    """A shard stack's share, as the JSON text the fleet stack exported (or the preview's file)."""
    if split.shares_file:
        try:
            with open(split.shares_file, encoding="utf-8") as fh:
                outputs = json.load(fh)
        except (OSError, ValueError) as exc:
            raise ResourceError(f"cannot read the shares file {split.shares_file}: {exc}", parent) from None
        return pulumi.Output.from_input(_share_text(outputs, split, parent))
    ref = pulumi.StackReference(split.fleet_stack, opts=pulumi.ResourceOptions(parent=parent))
    return ref.outputs.apply(lambda outputs: _share_text(outputs, split, parent))


def shard_plan(fleet: Fleet, text: pulumi.Output[str], control: ControlPlan, parent: pulumi.Resource
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

    return text.apply(plan)


def other_gateway_urls(split: SplitArgs, shard: str, parent: pulumi.Resource) -> pulumi.Output[Mapping[str, str]]:
    """The workload gateway URLs another shard stack exported (its LoadBalancers' addresses):
    the control-plane gateway's routes need them, so its shard runs after the others."""
    name = shard_stack(split.fleet_stack, shard)
    ref = pulumi.StackReference(name, opts=pulumi.ResourceOptions(parent=parent))
    return ref.outputs.apply(lambda outputs: dict((outputs or {}).get(GATEWAY_URLS_OUTPUT) or {}))
