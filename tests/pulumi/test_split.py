"""The program split across stacks, under mocks: the fleet stack places and exports the
shares, each shard stack registers exactly its clusters' share of what one stack
registers, and the control plane's shard reaches the other shards' gateways through
their stack outputs (issue 15 item 3; the real engine: tests/engine/test_split_stacks.py)."""

from __future__ import annotations

import json

import pytest

from tests.pulumi.harness import resolve, run_program

FLEET = "prod"


def _split(role: str, **extra: object) -> dict:
    return {"split": {"role": role, "shardSize": 1, **extra}}


def _objects(run) -> dict[tuple[str, str], dict]:
    """Every Kubernetes object a run registered, by (type, name), with its provider's name."""
    return {(r.typ, r.name): {"inputs": r.inputs, "provider": run.provider_of(r)}
            for r in run.resources if r.typ.startswith("kubernetes:") and r.custom}


def _fleet(stack: str, **config: object) -> tuple[object, dict]:
    run = run_program(stack, config={**_split("fleet"), **config}, name=FLEET)
    outputs = {k: resolve(v) for k, v in run.outputs.items()}
    return run, outputs


def _shards(stack: str, outputs: dict, others: dict | None = None, **config: object) -> dict[str, object]:
    """Every shard stack, in the driver's order: the control plane's shard last, reading
    the gateway URLs the others exported."""
    layout = outputs["layout"]
    stacks = {FLEET: outputs, **(others or {})}
    runs = {}
    for shard in [*[s for s in layout["shards"] if s != layout["control"]], layout["control"]]:
        name = f"{FLEET}.{shard}"
        runs[shard] = run_program(stack, config={**_split("shard", fleetStack=FLEET, shard=shard), **config},
                                  name=name, stacks=stacks)
        stacks.setdefault(name, {k: resolve(v) for k, v in runs[shard].outputs.items()})
    return runs


@pytest.mark.parametrize("stack", ["render", "kind", "byo"])
def test_shard_stacks_register_exactly_what_one_stack_registers(stack):
    config = {"endpointApiKeys": {"ml-team/together-key": "sk-test-123"}} if stack == "byo" else {}
    secrets = ["modelplane:endpointApiKeys"] if config else []
    one = run_program(stack, config=config, secret_keys=secrets)
    fleet, outputs = _fleet(stack, **config)
    assert not _objects(fleet), "the fleet stack registers no Kubernetes object"
    assert fleet.of_type("pulumi-python:dynamic/modelplane:FleetPlacement")
    assert resolve(one.outputs["deployments"]) == outputs["deployments"]
    split: dict[tuple[str, str], dict] = {}
    for shard, run in _shards(stack, outputs, **config).items():
        mine = _objects(run)
        assert not set(mine) & set(split), f"shard {shard} registers objects another shard registers"
        split.update(mine)
    assert split == _objects(one)


def test_a_shard_reads_its_share_not_the_whole_placement():
    _, outputs = _fleet("render")
    shares = {shard: json.loads(text) for shard, text in outputs["shares"].items()}
    for shard, share in shares.items():
        clusters = set(outputs["layout"]["shards"][shard])
        replicas = [r for d in share["placement"]["deployments"] for r in d["replicas"]]
        assert {r["cluster"] for r in replicas} <= clusters
        assert set(share["facts"]) == clusters
    assert "placement" not in outputs   # the fleet stack exports no second copy of it


def test_a_shard_without_its_share_fails_cleanly():
    with pytest.raises(Exception, match="no share for shard eu-west"):  # noqa: B017 - the program's RunError
        run_program("render", config=_split("shard", fleetStack=FLEET, shard="eu-west"), name=f"{FLEET}.eu-west",
                    stacks={FLEET: {}})


def test_the_control_shard_names_a_shard_stack_that_exported_no_gateway_yet():
    _, outputs = _fleet("aws")
    with pytest.raises(Exception, match=r"aws-us-west.*prod\.aws-us-west"):  # noqa: B017 - the program's RunError
        run_program("aws", config=_split("shard", fleetStack=FLEET, shard="aws-us-east"), name=f"{FLEET}.aws-us-east",
                    stacks={FLEET: outputs})


def test_an_unknown_shard_is_a_clean_error():
    with pytest.raises(Exception, match="no shard 'nowhere'"):  # noqa: B017 - the program's RunError
        run_program("render", config=_split("shard", fleetStack=FLEET, shard="nowhere"), name=f"{FLEET}.nowhere",
                    stacks={FLEET: {}})


def test_the_control_shard_routes_to_other_shards_gateways_by_their_outputs():
    """aws: the control plane runs on aws-us-east (InferenceGateway clusterName), and
    aws-us-west's gateway is a LoadBalancer whose address only its own shard stack knows."""
    _, outputs = _fleet("aws")
    layout = outputs["layout"]
    assert layout["control"] == "aws-us-east"
    west = {"gatewayUrls": {"aws-us-west": "http://west-gateway.lb.example"}}   # as if applied before
    runs = _shards("aws", outputs, others={f"{FLEET}.aws-us-west": west})
    east = runs["aws-us-east"]
    routes = east.named("modelplane-gateway-routes", "kubernetes:core/v1:ConfigMap")
    text = resolve(routes.inputs["data"]) if not isinstance(routes.inputs["data"], dict) else routes.inputs["data"]
    assert "https://west-gateway.lb.example" in json.dumps(text)   # dialled over mutual TLS
    assert not runs["aws-us-west"].of_type("modelplane:index:ControlPlaneGateway")
    exported = resolve(runs["aws-us-west"].outputs["gatewayUrls"])
    assert list(exported) == ["aws-us-west"] and exported["aws-us-west"].startswith("http://")
