"""Run the real program (`__main__.py`) against Pulumi mocks, one stack at a time.

Mocks do not run a dynamic provider's check(), so `new_resource` runs
`PlacementProvider.check` itself for `pulumi-python:dynamic/...` types and returns its
result as the resource's state: the placement then flows downstream exactly as the
engine makes it flow at preview (pulumi-notes A5). The previous run's state can be
passed in as `previous`, which check() receives as `olds`, so two runs model
`pulumi up` twice.

Under preview mocks, an Output nobody returned is unknown and an apply on it never
runs, so a check inside it would pass vacuously: `resolve()` fails on unknowns.
"""

from __future__ import annotations

import json
import logging
import os
import runpy
from dataclasses import dataclass, field
from typing import Any

import pulumi
import yaml
from google.protobuf import json_format
from pulumi.runtime import mocks as pmocks
from pulumi.runtime import settings
from pulumi.runtime.stack import run_pulumi_func
from pulumi.runtime.sync_await import _sync_await

from tests.engine_values import through_the_engine

ROOT_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MAIN = os.path.join(ROOT_DIR, "__main__.py")
PROJECT = "modelplane"
EKS_AUTONAME = "-a1b2c3d"   # what the mocks append to an EKS cluster's name, as Pulumi's auto-naming does


@dataclass
class Registration:
    typ: str
    name: str
    inputs: dict
    provider: str
    parent: str
    custom: bool
    urn: str = ""
    secret_keys: set[str] = field(default_factory=set)  # top-level inputs sent as secrets
    aliases: list[dict] = field(default_factory=list)   # alias specs sent with the registration
    delete_before_replace: bool = False
    custom_timeouts: dict = field(default_factory=dict)  # {"create": "60m", ...} when set
    dependencies: list[str] = field(default_factory=list)  # URNs of its depends_on (and its inputs' resources)


@dataclass
class Run:
    resources: list[Registration]
    outputs: dict[str, Any]
    state: dict[str, dict]
    logs: list[tuple[int, str]] = field(default_factory=list)
    program: dict[str, Any] = field(default_factory=dict)  # the program module's globals

    def of_type(self, typ: str) -> list[Registration]:
        return [r for r in self.resources if r.typ == typ]

    def named(self, name: str, typ: str | None = None) -> Registration:
        found = [r for r in self.resources if r.name == name and (typ is None or r.typ == typ)]
        assert len(found) == 1, f"{len(found)} resources named {name!r}"
        return found[0]

    def objects(self, component: str, cluster: str) -> list[dict]:
        """The Kubernetes objects a component registered on one cluster."""
        return [r.inputs for r in self.resources
                if r.parent.endswith(f"::{component}") and r.name.startswith(f"{cluster}:")]

    def provider_of(self, reg: Registration) -> str:
        """The name of the provider resource a registration uses (from its reference
        `urn::id`), following component parents for providers=[...] inheritance."""
        ref = reg.provider
        return ref.split("::")[-2] if ref else ""

    def secret_inputs(self, reg: Registration) -> set[str]:
        return reg.secret_keys

    def warnings(self) -> list[str]:
        return [m for level, m in self.logs if level >= logging.WARNING]

    def infos(self) -> list[str]:
        return [m for level, m in self.logs if level == logging.INFO]


def resolve(output: Any) -> Any:
    """The value of an Output; fails when it never became known."""
    if not isinstance(output, pulumi.Output):
        if isinstance(output, dict):
            return {k: resolve(v) for k, v in output.items()}
        if isinstance(output, list):
            return [resolve(v) for v in output]
        return output
    assert _sync_await(output.is_known()), "output was never resolved (unknown)"
    return resolve(_sync_await(output.future()))


class FleetMocks(pmocks.Mocks):
    def __init__(self, previous: dict[str, dict] | None = None, stacks: dict[str, dict] | None = None):
        self.previous = previous or {}
        self.stacks = stacks or {}       # stack name -> its outputs, for StackReferences
        self.state: dict[str, dict] = {}

    def new_resource(self, args: pmocks.MockResourceArgs):
        if args.typ == "pulumi:pulumi:StackReference":
            # what another stack exported, as the engine hands it over: numbers as floats
            name = args.resource_id or args.name
            outputs = through_the_engine(self.stacks.get(name, {}))
            return name, {"name": name, "outputs": outputs, "secretOutputNames": []}
        state = dict(args.inputs)
        if args.typ.startswith(("aws:", "gcp:")):
            # Cloud names and ARNs are computed by the provider; give them values.
            state.setdefault("name", args.name)
            state.setdefault("arn", f"arn:aws:mock:::{args.name}")
        if args.typ.endswith(("modelplane:HopCA", "modelplane:GatewayCertificate")):
            # providers/certificates.py: stand-in PEM text (the real ones are made in tests/unit)
            state.update(cert=f"mock certificate {args.inputs.get('commonName')}",
                         key=f"mock private key {args.inputs.get('commonName')}")
        elif args.typ.startswith("pulumi-python:dynamic"):
            from providers.placement import PlacementProvider

            result = PlacementProvider().check(self.previous.get(args.name, {}), args.inputs)
            assert not result.failures, [f.reason for f in result.failures]
            state = dict(result.inputs)
        elif args.typ == "command:local:Command":
            state["stdout"] = f"apiVersion: v1\nkind: Config\n# kind cluster {args.name}\n"
        elif args.typ == "aws:eks/cluster:Cluster":
            # The engine auto-names it `<name>-<7 random characters>`: the physical name differs.
            state.update(name=f"{args.name}{EKS_AUTONAME}", endpoint=f"https://{args.name}.eks.example",
                         certificateAuthority={"data": "Q0E="},
                         vpcConfig={**state.get("vpcConfig", {}), "clusterSecurityGroupId": "sg-cluster"})
        elif args.typ == "gcp:container/cluster:Cluster":
            state.update(name=args.name, endpoint="203.0.113.10", masterAuth={"clusterCaCertificate": "Q0E="})
        elif args.typ == "kubernetes:core/v1:Service" and state.get("spec", {}).get("type") == "LoadBalancer":
            state["status"] = {"loadBalancer": {"ingress": [{"hostname": f"{args.name}.lb.example"}]}}
        elif args.typ == "aws:ec2/launchTemplate:LaunchTemplate":
            state["latestVersion"] = 1
        self.state[args.name] = state
        return f"{args.name}-id", state

    def call(self, args: pmocks.MockCallArgs):
        return {}


class RecordingMonitor(pmocks.MockMonitor):
    def __init__(self, mocks: FleetMocks):
        super().__init__(mocks)
        self.records: list[Registration] = []

    def RegisterResource(self, request):
        response = super().RegisterResource(request)
        if request.type != "pulumi:pulumi:Stack":
            from pulumi.runtime import rpc

            raw = json_format.MessageToDict(request.object)
            secret = {k for k, v in raw.items() if _is_secret(v)}
            inputs = _unwrap(rpc.deserialize_properties(request.object))
            aliases = [json_format.MessageToDict(a) for a in request.aliases]
            self.records.append(Registration(request.type, request.name, inputs, request.provider,
                                             request.parent, request.custom, response.urn, secret, aliases,
                                             request.deleteBeforeReplace,
                                             json_format.MessageToDict(request.customTimeouts),
                                             list(request.dependencies)))
        return response


def _is_secret(value: Any) -> bool:
    from pulumi.runtime import rpc

    return isinstance(value, dict) and value.get(rpc._special_sig_key) == rpc._special_secret_sig


def _unwrap(value: Any) -> Any:
    """Inputs with secrets replaced by their values (secretness is kept in secret_keys)."""
    if _is_secret(value):
        return _unwrap(value.get("value"))
    if isinstance(value, dict):
        return {k: _unwrap(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_unwrap(v) for v in value]
    return value


class _Collect(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.records: list[tuple[int, str]] = []

    def emit(self, record):
        self.records.append((record.levelno, record.getMessage()))


def _cancel_leftovers() -> None:
    """A run that failed inside an apply leaves tasks behind, pending or failed, which the
    runtime keeps in its settings; dropped here, they cannot raise their error into the
    next run's wait for its own outputs."""
    import asyncio

    loop = asyncio.get_event_loop()
    pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
    for task in pending:
        task.cancel()
    if pending:
        loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
    with settings.SETTINGS.lock:
        settings.SETTINGS.outputs.clear()   # failed ones too: the next run would await them


def stack_config(stack: str, overrides: dict[str, Any] | None = None) -> dict[str, str]:
    with open(os.path.join(ROOT_DIR, "stacks", f"Pulumi.{stack}.yaml")) as f:
        raw = (yaml.safe_load(f) or {}).get("config", {})
    raw.update(overrides or {})
    out = {}
    for key, value in raw.items():
        if key.startswith("pulumi:"):
            continue
        out[key] = value if isinstance(value, str) else json.dumps(value)
    return out


def run_program(stack: str, preview: bool = False, previous: dict[str, dict] | None = None,
                config: dict[str, Any] | None = None, secret_keys: list[str] | None = None,
                stacks: dict[str, dict] | None = None, name: str | None = None) -> Run:
    """`stack`: whose stacks/Pulumi.<stack>.yaml config to run with (plus `config`);
    `name`: the stack's name (default `stack`); `stacks`: other stacks' outputs."""
    settings.ROOT.set(None)
    mocks = FleetMocks(previous, stacks)
    monitor = RecordingMonitor(mocks)
    handler = _Collect()
    logger = logging.getLogger(f"modelplane-test-{stack}")
    logger.handlers = [handler]
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    pmocks.set_mocks(mocks, project=PROJECT, stack=name or stack, preview=preview, monitor=monitor, logger=logger)
    pulumi.runtime.set_all_config({f"{k}" if ":" in k else f"{PROJECT}:{k}": v
                                   for k, v in stack_config(stack, config).items()}, secret_keys or [])
    root = settings.get_root_resource()
    cwd = os.getcwd()
    os.chdir(ROOT_DIR)
    program: dict[str, Any] = {}
    try:
        _sync_await(run_pulumi_func(lambda: program.update(runpy.run_path(MAIN, run_name="__main__"))))
    finally:
        os.chdir(cwd)
        _cancel_leftovers()
    return Run(monitor.records, dict(root.outputs), mocks.state, handler.records, program)
