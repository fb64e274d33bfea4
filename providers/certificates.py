"""The data path's certificates as Pulumi dynamic resources, made with `cryptography`
(modelplane.gateway.pki): the hop CA, a certificate per gateway signed by it, and a
self-signed edge certificate on request.

Private keys are outputs marked secret (`additional_secret_outputs`), and the CA's key
reaches a certificate resource only as a secret input, so the state holds them encrypted
and previews show `[secret]`. A certificate is made once: an unchanged input keeps it; a
change to its names, usage or CA replaces it. Nothing is done at import time (the provider
class is pickled by reference and imported inside the provider process).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import pulumi
from pulumi.dynamic import CreateResult, DiffResult, ReadResult, Resource, ResourceProvider

from modelplane.gateway import pki
from modelplane.json_types import JsonObject

SECRET_OUTPUTS = ["key"]


def _id(kind: str, props: JsonObject) -> str:
    """A resource id naming what it is, never derived from a key."""
    seed = "|".join(str(props.get(k, "")) for k in ("commonName", "usage", "names"))
    return f"{kind}-{hashlib.sha256(seed.encode()).hexdigest()[:16]}"


def _replaces(olds: JsonObject, news: JsonObject, keys: Sequence[str]) -> DiffResult:
    changed = [k for k in keys if olds.get(k) != news.get(k)]
    return DiffResult(changes=bool(changed), replaces=changed, delete_before_replace=False)


class HopCAProvider(ResourceProvider):
    def create(self, props: JsonObject) -> CreateResult:
        ca = pki.new_ca(str(props["commonName"]))
        return CreateResult(_id("ca", props), {"commonName": props["commonName"], "cert": ca.cert_pem,
                                               "key": ca.key_pem})

    def diff(self, _id: str, olds: JsonObject, news: JsonObject) -> DiffResult:
        return _replaces(olds, news, ["commonName"])

    def read(self, id_: str, props: JsonObject) -> ReadResult:
        return ReadResult(id_, props)


class GatewayCertificateProvider(ResourceProvider):
    def create(self, props: JsonObject) -> CreateResult:
        ca = pki.KeyPair(str(props["caCert"]), str(props["caKey"]))
        names = [str(n) for n in props.get("names") or []]
        if props.get("usage") == "self-signed":
            pair = pki.self_signed(names)
        else:
            pair = pki.issue(ca, str(props["commonName"]), props["usage"], names)
        # `olds` in diff() are these outputs: they carry what decides a replacement (the CA's
        # certificate, public), never the CA's key.
        return CreateResult(_id("cert", props), {"commonName": props["commonName"], "usage": props["usage"],
                                                 "names": names, "caCert": props.get("caCert") or "",
                                                 "cert": pair.cert_pem, "key": pair.key_pem})

    def diff(self, _id: str, olds: JsonObject, news: JsonObject) -> DiffResult:
        return _replaces(olds, news, ["commonName", "usage", "names", "caCert"])

    def read(self, id_: str, props: JsonObject) -> ReadResult:
        return ReadResult(id_, props)


class HopCA(Resource, module="modelplane", name="HopCA"):
    """The fleet's hop CA: every workload gateway trusts client certificates it signed."""

    cert: pulumi.Output[str]
    key: pulumi.Output[str]

    def __init__(self, name: str, common_name: str, opts: pulumi.ResourceOptions | None = None) -> None:
        opts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(additional_secret_outputs=SECRET_OUTPUTS))
        super().__init__(HopCAProvider(), name, {"commonName": common_name, "cert": None, "key": None}, opts)


class GatewayCertificate(Resource, module="modelplane", name="GatewayCertificate"):
    """A certificate signed by the hop CA (`server`: a workload gateway's, for `names`;
    `client`: the control plane's), or `self-signed` (an edge certificate on request)."""

    cert: pulumi.Output[str]
    key: pulumi.Output[str]

    def __init__(self, name: str, *, common_name: str, usage: str, names: Sequence[str] = (),
                 ca: tuple[pulumi.Input[str], pulumi.Input[str]] | None = None,
                 opts: pulumi.ResourceOptions | None = None) -> None:
        """`ca`: the hop CA's certificate and key (the key a secret); none for `self-signed`."""
        opts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(additional_secret_outputs=SECRET_OUTPUTS))
        props: JsonObject = {"commonName": common_name, "usage": usage, "names": list(names),
                                 "caCert": ca[0] if ca is not None else "",
                                 "caKey": pulumi.Output.secret(ca[1]) if ca is not None else "",
                                 "cert": None, "key": None}
        super().__init__(GatewayCertificateProvider(), name, props, opts)
