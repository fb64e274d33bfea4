"""A thin in-process driver for the pack: the SDK's analyzer servicer, fed the protobuf
requests the Pulumi engine sends (pulumi_policy 1.21.0; the servicer is private, so all
knowledge of it stays in this file)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

from google.protobuf import empty_pb2, json_format, struct_pb2
from pulumi.runtime.proto import analyzer_pb2 as pb
from pulumi_policy import EnforcementLevel
from pulumi_policy.deserialize import SPECIAL_SECRET_SIG, SPECIAL_SIG_KEY
from pulumi_policy.policy import _PolicyAnalyzerServicer

PACK_DIR = Path(__file__).resolve().parents[2] / "policy-packs" / "modelplane"
LEVELS = {"advisory": pb.ADVISORY, "mandatory": pb.MANDATORY, "remediate": pb.REMEDIATE,
          "disabled": pb.DISABLED}
NAMES = {v: k for k, v in LEVELS.items()}


def load_policies():
    """policy-packs/modelplane/policies.py, imported by path (it is not a package)."""
    spec = importlib.util.spec_from_file_location("modelplane_pack_policies", PACK_DIR / "policies.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


POLICIES = load_policies()


def secret(value: Any) -> dict:
    """A value as the engine marks a Pulumi secret on the wire."""
    return {SPECIAL_SIG_KEY: SPECIAL_SECRET_SIG, "value": value}


def struct(props: dict) -> struct_pb2.Struct:
    out = struct_pb2.Struct()
    out.update(props)
    return out


def urn(type_: str, name: str) -> str:
    return f"urn:pulumi:dev::modelplane::{type_}::{name}"


class Analyzer:
    def __init__(self) -> None:
        self.servicer = _PolicyAnalyzerServicer(
            POLICIES.PACK_NAME, "0.1.0", POLICIES.build_policies(), EnforcementLevel.ADVISORY)

    def info(self) -> dict[str, str]:
        """policy name -> default level, as `pulumi preview` learns them."""
        got = self.servicer.GetAnalyzerInfo(empty_pb2.Empty(), None)
        return {p.name: NAMES[p.enforcementLevel] for p in got.policies}

    def configure(self, config: dict[str, dict]) -> None:
        """`--policy-pack-config` as the engine forwards it: {policy: {"enforcementLevel": ..., key: value}}."""
        request = pb.ConfigureAnalyzerRequest()
        for name, value in config.items():
            props = {k: v for k, v in value.items() if k != "enforcementLevel"}
            level = LEVELS[value.get("enforcementLevel", "advisory")]
            request.policyConfig[name].CopyFrom(pb.PolicyConfig(enforcementLevel=level, properties=struct(props)))
        self.servicer.Configure(request, None)

    def analyze_response(self, type_: str, name: str, props: dict) -> pb.AnalyzeResponse:
        request = pb.AnalyzeRequest(type=type_, name=name, urn=urn(type_, name), properties=struct(props))
        return self.servicer.Analyze(request, None)

    def analyze(self, type_: str, name: str, props: dict) -> list[tuple[str, str, str]]:
        return self._diagnostics(self.analyze_response(type_, name, props))

    def analyze_stack(self, resources: list[tuple[str, str, dict]]) -> list[tuple[str, str, str]]:
        request = pb.AnalyzeStackRequest(resources=[
            pb.AnalyzerResource(type=t, name=n, urn=urn(t, n), properties=struct(p)) for t, n, p in resources])
        return self._diagnostics(self.servicer.AnalyzeStack(request, None))

    @staticmethod
    def _diagnostics(response) -> list[tuple[str, str, str]]:
        return [(d.policyName, NAMES[d.enforcementLevel], d.message) for d in response.diagnostics]


def to_wire(value: Any) -> Any:
    """JSON round trip, so test props look like what crosses the gRPC boundary."""
    return json_format.MessageToDict(struct({"v": value}))["v"]
