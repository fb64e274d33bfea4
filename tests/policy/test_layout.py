"""The pack's files as the Pulumi CLI loads them (no CLI here: read, don't run)."""

import ast

import yaml

from .analyzer import PACK_DIR


def test_pulumi_policy_yaml_declares_a_python_pack():
    project = yaml.safe_load((PACK_DIR / "PulumiPolicy.yaml").read_text())
    assert project["runtime"]["name"] == "python"
    assert project["version"] and project["description"]


def test_main_only_builds_the_pack():
    # PolicyPack() serves gRPC and blocks forever: __main__ must do nothing else, and
    # nothing the tests import may construct it.
    tree = ast.parse((PACK_DIR / "__main__.py").read_text())
    statements = [s for s in tree.body if not isinstance(s, (ast.Import, ast.ImportFrom))]
    assert len(statements) == 2  # docstring + the PolicyPack(...) call
    call = statements[1].value
    assert isinstance(call, ast.Call) and call.func.id == "PolicyPack"
    policies = (PACK_DIR / "policies.py").read_text()
    assert "PolicyPack(" not in policies


def test_requirements_pin_the_policy_sdk():
    lines = (PACK_DIR / "requirements.txt").read_text().splitlines()
    assert "pulumi-policy==1.21.0" in lines


def test_example_config_is_valid_for_lint_and_the_pack():
    import json

    from modelplane.checks import levels_from_config

    config = json.loads((PACK_DIR / "policy-config.example.json").read_text())
    assert levels_from_config(config) == {
        "declared-capacity": "mandatory", "fabric-multi-node-tcp": "advisory",
        "prefill-decode-needs-nixl": "mandatory", "kind-node-image": "disabled"}
