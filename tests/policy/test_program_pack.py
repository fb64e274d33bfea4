"""The pack over the real program's registrations (Pulumi mocks, no engine): every resource
the program registers goes through the analyzer with the properties as sent on the wire,
secrets still marked. Our own stacks must pass our own pack."""

from __future__ import annotations

import os
import runpy

import pulumi
import pytest
from google.protobuf import json_format
from pulumi.runtime import mocks as pmocks
from pulumi.runtime import settings
from pulumi.runtime.stack import run_pulumi_func
from pulumi.runtime.sync_await import _sync_await

from tests.pulumi.harness import MAIN, PROJECT, ROOT_DIR, FleetMocks, stack_config

from .analyzer import Analyzer

PLACEMENT = "pulumi-python:dynamic/modelplane:FleetPlacement"


class WireMonitor(pmocks.MockMonitor):
    """Records each registration's properties as the wire carries them."""

    def __init__(self, mocks):
        super().__init__(mocks)
        self.registrations: list[tuple[str, str, dict]] = []

    def RegisterResource(self, request):
        response = super().RegisterResource(request)
        if request.type != "pulumi:pulumi:Stack":
            self.registrations.append((request.type, request.name, json_format.MessageToDict(request.object)))
        return response


def registrations(stack: str, config: dict | None = None) -> list[tuple[str, str, dict]]:
    settings.ROOT.set(None)
    mocks = FleetMocks()
    monitor = WireMonitor(mocks)
    pmocks.set_mocks(mocks, project=PROJECT, stack=stack, preview=False, monitor=monitor)
    pulumi.runtime.set_all_config({k if ":" in k else f"{PROJECT}:{k}": v
                                   for k, v in stack_config(stack, config).items()}, [])
    cwd = os.getcwd()
    os.chdir(ROOT_DIR)
    try:
        _sync_await(run_pulumi_func(lambda: runpy.run_path(MAIN, run_name="__main__")))
    finally:
        os.chdir(cwd)
    return monitor.registrations


@pytest.mark.parametrize("stack, config", [
    ("kind", None),
    ("byo", {"endpointApiKeys": {"ml-team/together-key": "sk-test-123"},
             "kubeconfigs": {"byo-east": "apiVersion: v1\nkind: Config\n"}}),
])
def test_our_stacks_pass_our_pack(stack, config):
    regs = registrations(stack, config)
    assert [n for t, n, _ in regs if t == PLACEMENT], "the program registers no placement resource"
    analyzer = Analyzer()
    found = [(name, policy, level, message)
             for typ, name, props in regs
             for policy, level, message in analyzer.analyze(typ, name, props)]
    assert [f for f in found if f[2] == "mandatory"] == []
    assert analyzer.analyze_stack(regs) == []


def test_a_shortfall_the_program_only_warns_about_fails_the_pack(tmp_path):
    from tests.pulumi.fleets import fleet_text

    (tmp_path / "fleet.yaml").write_text(fleet_text({"eu-west": 1, "us-east": 1}, {"chat": 2}, copies=2))
    regs = registrations("render", {"manifests": str(tmp_path)})
    analyzer = Analyzer()
    found = [(policy, level, message.splitlines()[1])
             for typ, name, props in regs if typ == PLACEMENT
             for policy, level, message in analyzer.analyze(typ, name, props)]
    assert [(p, lvl) for p, lvl, _ in found] == [("replicas-fully-scheduled", "mandatory")]
    assert " spec.replicas: 0 of 2 replicas placed (ReplicasScheduled=False, InsufficientCapacity: " in found[0][2]
