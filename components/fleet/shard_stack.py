"""A shard stack of a split fleet (docs/pulumi-program.md, "Split stacks"): the clusters of one
shard from the share the fleet stack exported, the caches and deployments placed on them, and
their gateways' addresses as an output; the shard hosting the control-plane gateway also
registers it, the services and the hand-written endpoints, routing to every shard's gateways."""

from __future__ import annotations

from collections.abc import Mapping

import pulumi

from components.args import FleetArgs, SplitArgs
from components.certificates import fleet_hop_ca
from components.errors import ResourceError
from components.gateway import TraefikGateway
from components.split import (
    APPLIED_OUTPUT,
    GATEWAY_URLS_OUTPUT,
    applied_record,
    other_gateway_urls,
    shard_inputs_digest,
    shard_plan,
    shard_share_text,
    shard_stack,
)
from modelplane.plan import FleetPlan
from modelplane.plan.share import FleetDigests, StackLayout, shard_of
from modelplane.render.gateway import static_gateway_url
from modelplane.scheduler import candidate_clusters

from .base import ModelplaneFleet


class ShardStackFleet(ModelplaneFleet):
    def __init__(self, name: str, args: FleetArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(name, args, opts)
        split, layout = args.split, self.layout
        assert split is not None and layout is not None
        if split.shard not in layout.shards:
            raise ResourceError(f"stack config split.shard: no shard {split.shard!r} in this fleet's layout "
                                f"(shard size {split.shard_size}): {', '.join(layout.shards)}", self)
        text = shard_share_text(split, self)
        self.plan = shard_plan(args.fleet, text, self.control_plan, self)
        here = list(layout.shards[split.shard])
        hosts_control = split.shard == layout.control
        # what `python -m modelplane preview` compares with the share it previews (automation/split.py)
        self.outputs[APPLIED_OUTPUT] = pulumi.Output.all(text, self.plan).apply(
            lambda a: applied_record(shard_inputs_digest(FleetDigests(args.fleet), a[0], control=hosts_control),
                                     split.from_config))
        if not args.render_dir:
            self._certificates(here, hosts_control=hosts_control, ca=lambda: fleet_hop_ca(split.fleet_stack, self))
        gateways = self._register_clusters(here)
        if here:
            self.plan.apply(self._register_placed)
        # what the shard hosting the control-plane gateway reads (other_gateway_urls)
        self.outputs[GATEWAY_URLS_OUTPUT] = self._gateway_urls(gateways, here)
        self._report_secrets(here, hosts_control=hosts_control)
        if hosts_control:
            self._register_control(self._every_gateway_url(split, layout, gateways))
        self._finish()

    def _register_placed(self, fp: FleetPlan) -> None:
        """The caches staged and the deployments placed on this shard's clusters: with one
        stack per few clusters, a component per fleet-wide cache and deployment in every shard
        would outnumber the objects."""
        for key in sorted({(c.namespace, c.name) for p in fp.clusters.values() for c in p.caches}):
            self._cache(key)
        candidates = candidate_clusters(self.args.fleet)
        for d in fp.placement.deployments:
            self._deployment((d.namespace, d.name), candidates[(d.namespace, d.name)])

    def _every_gateway_url(self, split: SplitArgs, layout: StackLayout, gateways: Mapping[str, TraefikGateway]
                           ) -> pulumi.Output[dict[str, str]]:
        """Every workload gateway's URL, for the control-plane routes: this shard's, the static
        ones, and those another shard stack exported (read from its outputs)."""
        clusters = self.args.fleet.clusters
        if self.args.render_dir:
            return self._gateway_urls(gateways, sorted(clusters))
        own = self._gateway_urls(gateways, sorted(gateways))
        static = {n: u for n, c in clusters.items() if n not in gateways and (u := static_gateway_url(c)) is not None}
        shards = sorted({s for n in clusters if n not in gateways and n not in static
                         and (s := shard_of(layout.shards, n)) is not None})
        others = [other_gateway_urls(split, shard, self) for shard in shards]

        def merge(parts: list[Mapping[str, str]]) -> dict[str, str]:
            urls: dict[str, str] = dict(static)
            for part in parts:
                urls.update(part)
            missing = sorted(set(clusters) - set(urls))
            if missing:
                stacks = ", ".join(sorted({shard_stack(split.fleet_stack, shard_of(layout.shards, n) or n)
                                           for n in missing}))
                raise ResourceError(f"no gateway address yet for cluster(s) {', '.join(missing)}: their shard "
                                    f"stack(s) {stacks} must run before this one (`python -m modelplane up` "
                                    "orders them), or give the clusters spec.gateway.hostname", self)
            return urls

        return pulumi.Output.all(own, *others).apply(merge)
