"""The whole fleet in one stack (`args.split` None): the placement, every cluster with its caches
and deployments, the control-plane gateway and the services, and after `up` the verification."""

from __future__ import annotations

import pulumi

from components.args import FleetArgs
from components.observe import verification
from modelplane.scheduler import candidate_clusters

from .base import ModelplaneFleet


class OneStackFleet(ModelplaneFleet):
    def __init__(self, name: str, args: FleetArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(name, args, opts)
        fleet = args.fleet
        self._place()
        self.outputs["placement"] = self.plan.apply(lambda fp: fp.placement.to_json())
        here = sorted(fleet.clusters)
        # Mutual TLS between the hops: one CA per fleet (render mode: referenced, never made).
        if not args.render_dir:
            self._certificates(here, hosts_control=True)
        gateways = self._register_clusters(here)
        if here:
            for key in sorted(fleet.caches):
                self._cache(key)
            for key, candidates in candidate_clusters(fleet).items():
                self._deployment(key, candidates)
        self._report_secrets(here, hosts_control=True)
        self._register_control(self._gateway_urls(gateways, sorted(fleet.clusters)))
        placement = self._observation()
        if placement is not None and self.observe is not None:
            # After `up`: whether the clusters run what was placed (docs/observe.md).
            self.outputs["verification"] = verification(
                fleet, placement.placement, self.observe, args.observe.verify_wait if args.observe else 0,
                [d.created for d in self.deployments.values()])
        self._finish()
