"""The fleet stack of a split fleet (docs/pulumi-program.md, "Split stacks"): it places the fleet
and exports every shard's share, the stack layout and the hop CA; it registers no cluster. A split
fleet verifies with `python -m modelplane verify`, so there is no `verification` output here."""

from __future__ import annotations

import pulumi

from components.args import FleetArgs
from components.certificates import HOP_CA_OUTPUT
from components.split import LAYOUT_OUTPUT, SHARES_OUTPUT

from .base import ModelplaneFleet


class FleetStackFleet(ModelplaneFleet):
    def __init__(self, name: str, args: FleetArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(name, args, opts)
        assert self.layout is not None
        decision = self._place()
        self.outputs[SHARES_OUTPUT] = decision.apply(lambda d: dict(d.shares))
        self.outputs[LAYOUT_OUTPUT] = self.layout.to_json()
        if not args.render_dir:
            # The hop CA every shard stack's gateways trust (it makes no gateway certificate).
            certs = self._certificates([], hosts_control=False)
            self.outputs[HOP_CA_OUTPUT] = pulumi.Output.secret(
                pulumi.Output.all(certs.ca_cert, certs.ca_key).apply(lambda a: {"cert": a[0], "key": a[1]}))
        self._observation()
        self._finish()
