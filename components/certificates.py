"""DataPathCertificates: the hop CA of one stack's fleet and the certificates its gateways
mount (providers/certificates.py), as the Secret data each gateway's Secret is made of.

The CA's key and every private key stay Pulumi secrets end to end; in render mode this
component is not created at all (the Secrets are referenced, and listed, never written)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pulumi

from components.errors import ResourceError
from modelplane.json_types import JsonValue
from providers.certificates import GatewayCertificate, HopCA

TYPE = "modelplane:index:DataPathCertificates"
# The fleet stack of a split fleet exports its hop CA (a secret) for the shard stacks.
HOP_CA_OUTPUT = "hopCa"


@dataclass(kw_only=True)
class DataPathCertificatesArgs:
    gateways: Mapping[str, Sequence[str]]   # workload gateway -> the names its certificate carries
    control: str | None = None              # the control-plane gateway, for its client certificate
    self_signed: Sequence[str] = ()         # on request: names of a self-signed edge certificate
    # A shard stack: the fleet stack's CA (certificate, key); otherwise this component makes one.
    ca: tuple[pulumi.Input[str], pulumi.Input[str]] | None = None


def fleet_hop_ca(fleet_stack: str, parent: pulumi.Resource) -> tuple[pulumi.Output[str], pulumi.Output[str]]:
    """A shard stack's view of the fleet stack's hop CA, so every gateway of a split fleet
    trusts the same one. Before the fleet stack was applied there is none: a preview goes
    on with a placeholder, an update stops with what to do."""
    ref = pulumi.StackReference(f"{fleet_stack}-hop-ca", fleet_stack, opts=pulumi.ResourceOptions(parent=parent))

    def part(key: str) -> pulumi.Output[str]:
        def get(value: JsonValue) -> str:
            if isinstance(value, Mapping) and isinstance(value.get(key), str):
                return str(value[key])
            if pulumi.runtime.is_dry_run():
                return ""
            raise ResourceError(f"stack {fleet_stack} exports no {HOP_CA_OUTPUT}: apply the fleet stack first "
                                "(`python -m modelplane up` orders the stacks)", parent)
        return pulumi.Output.secret(ref.get_output(HOP_CA_OUTPUT).apply(get))

    return part("cert"), part("key")


class DataPathCertificates(pulumi.ComponentResource):
    def __init__(self, name: str, args: DataPathCertificatesArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(TYPE, name, {"gateways": sorted(args.gateways)}, opts)
        child = pulumi.ResourceOptions(parent=self)
        if args.ca is None:
            made = HopCA(f"{name}-ca", "modelplane hop CA", child)
            self.ca_cert: pulumi.Output[str] = made.cert
            self.ca_key: pulumi.Output[str] = pulumi.Output.secret(made.key)
        else:
            self.ca_cert, self.ca_key = pulumi.Output.from_input(args.ca[0]), pulumi.Output.secret(args.ca[1])
        ca = (self.ca_cert, self.ca_key)
        self._certs: dict[str, GatewayCertificate] = {
            gw: GatewayCertificate(f"{name}-{gw}", common_name=names[0], usage="server", names=names, ca=ca,
                                   opts=child)
            for gw, names in sorted(args.gateways.items())}
        if args.control is not None:
            self._certs[args.control] = GatewayCertificate(f"{name}-{args.control}-client",
                                                           common_name=args.control, usage="client", ca=ca,
                                                           opts=child)
        self.edge: GatewayCertificate | None = None
        if args.self_signed:
            self.edge = GatewayCertificate(f"{name}-edge-self-signed", common_name=args.self_signed[0],
                                           usage="self-signed", names=args.self_signed, opts=child)
        self.register_outputs({"caCertificate": self.ca_cert})

    def hop_secret(self, gateway: str) -> pulumi.Output[Mapping[str, str]]:
        """The data of `<gateway>-hop`: the CA's certificate, the gateway's certificate and key."""
        cert = self._certs[gateway]
        return pulumi.Output.secret(pulumi.Output.all(self.ca_cert, cert.cert, cert.key).apply(
            lambda a: {"ca.crt": a[0], "tls.crt": a[1], "tls.key": a[2]}))

    def edge_secret(self) -> pulumi.Output[Mapping[str, str]]:
        assert self.edge is not None
        return pulumi.Output.secret(pulumi.Output.all(self.edge.cert, self.edge.key).apply(
            lambda a: {"tls.crt": a[0], "tls.key": a[1]}))
