"""The split driver's decisions that need no engine: what config a shard stack gets and
in which order stacks run (the engine runs: tests/engine/test_split_stacks.py)."""

from __future__ import annotations

import json

import pytest

from automation.split import DriverError, fleet_split_block, layout_of, shard_config

FLEET_CONFIG = {
    "modelplane:manifests": {"value": "examples/byo", "secret": False},
    "modelplane:split": {"value": '{"role":"fleet","shardSize":1}', "objectValue": {"role": "fleet", "shardSize": 1},
                         "secret": False},
    "modelplane:kubeconfigs": {"value": json.dumps({"byo-east": "east-kc", "byo-west": "west-kc"}),
                               "objectValue": {"byo-east": "east-kc", "byo-west": "west-kc"}, "secret": True},
    "modelplane:hfToken": {"value": "hf_secret", "secret": True},
}


def test_a_shard_gets_the_fleet_config_its_split_block_and_only_its_clusters_kubeconfigs():
    config = shard_config("prod", FLEET_CONFIG, "byo-east", ["byo-east"], "digest-1")
    assert config["modelplane:split"]["objectValue"] == {
        "role": "shard", "fleetStack": "prod", "shard": "byo-east", "shardSize": 1, "fromConfig": "digest-1"}
    kubeconfigs = config["modelplane:kubeconfigs"]
    assert kubeconfigs["secret"] is True and json.loads(kubeconfigs["value"]) == {"byo-east": "east-kc"}
    assert config["modelplane:hfToken"] == {"value": "hf_secret", "secret": True}   # still a secret
    assert config["modelplane:manifests"] == FLEET_CONFIG["modelplane:manifests"]
    assert FLEET_CONFIG["modelplane:split"]["objectValue"]["role"] == "fleet"        # the fleet's is untouched


def test_only_a_fleet_stack_is_driven_as_split():
    assert fleet_split_block("prod", {}) is None   # a one-stack fleet
    with pytest.raises(DriverError, match="split.role must be fleet"):
        fleet_split_block("prod", {"modelplane:split": {"value": '{"role":"shard"}', "secret": False}})


def test_the_control_shard_runs_after_every_other_shard():
    layout = layout_of({"shards": {"a": ["a"], "control": [], "b": ["b"]}, "control": "control"})
    assert layout.order() == (["a", "b"], ["control"])
    with pytest.raises(DriverError, match="is split.role fleet"):
        layout_of(None)
