"""The real Pulumi engine on the `render` stack configuration (GitOps: every cluster's
Kubernetes provider writes YAML instead of applying it). Needs scripts/bootstrap-tools."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.engine.fleets import REPO, reference_placement, scaling_fleet

pytestmark = pytest.mark.engine

KIND_EXAMPLE = REPO / "examples" / "kind"


def _table_rows(stdout: str) -> set[tuple[str, ...]]:
    """Rows of the placement table the program logs (components/report.py)."""
    rows = set()
    lines = stdout.splitlines()
    for i, line in enumerate(lines):
        if "DEPLOYMENT" in line and "REPLICA" in line and "CLUSTER" in line:
            for row in lines[i + 1:]:
                cells = row.split()
                if len(cells) != 5 or "/" not in cells[0]:
                    break
                rows.add(tuple(cells))
    return rows


def _expected_rows(placement: Any) -> set[tuple[str, ...]]:
    rows = set()
    for dep in placement.to_json()["deployments"]:
        for rep in dep["replicas"]:
            pools = ",".join(f"{e}={'+'.join(p.get('members') or [p['pool']])}"
                             for e, p in sorted(rep["engines"].items()))
            rows.add((f"{dep['namespace']}/{dep['name']}", rep["name"], str(rep["index"]), rep["cluster"], pools))
    return rows


def _rendered(render_dir: Path, cluster: str) -> dict[tuple[str, str, str, str], dict]:
    """Objects the provider wrote for one cluster, keyed by (apiVersion, kind, namespace, name)."""
    out = {}
    for path in sorted((render_dir / cluster).rglob("*.yaml")):
        for obj in yaml.safe_load_all(path.read_text()):
            if not obj:
                continue
            meta = obj.get("metadata", {})
            out[(obj["apiVersion"], obj["kind"], meta.get("namespace", ""), meta["name"])] = obj
    return out


def _key(obj: dict) -> tuple[str, str, str, str]:
    meta = obj["metadata"]
    return obj["apiVersion"], obj["kind"], meta.get("namespace", ""), meta["name"]


def _normalize(value: Any) -> Any:
    return json.loads(json.dumps(value, sort_keys=True, default=str))


def _deployment_replicas(outputs: dict) -> dict[str, tuple[str, int]]:
    """replica name -> (cluster, index), from the `deployments` stack output."""
    reps = {}
    for dep in outputs["deployments"].value.values():
        for rep in dep["replicas"]:
            reps[rep["name"]] = (rep["cluster"], int(rep["index"]))
    return reps


def test_preview_shows_every_replica_cluster_and_pool_before_anything_exists(make_stack):
    es = make_stack(KIND_EXAMPLE)
    result = es.stack.preview(color="never")
    expected = _expected_rows(reference_placement(KIND_EXAMPLE))
    assert expected, "examples/kind should place at least one replica"
    shown = _table_rows(result.stdout)
    assert expected <= shown, f"preview placement table {shown} lacks {expected - shown}\n{result.stdout}"
    assert result.change_summary.get("create", 0) > 0
    assert not es.render_dir.exists() or not any(es.render_dir.rglob("*.yaml")), "preview wrote manifests"


def test_up_writes_every_cluster_manifests_matching_the_renderers(make_stack):
    from modelplane.api import load_manifests
    from modelplane.render import render_cluster_manifests

    es = make_stack(KIND_EXAMPLE)
    result = es.stack.up(color="never")
    assert result.summary.result == "succeeded"
    fleet = load_manifests(KIND_EXAMPLE)
    expected = render_cluster_manifests(fleet, reference_placement(KIND_EXAMPLE))
    for cluster, objects in expected.items():
        written = _rendered(es.render_dir, cluster)
        assert written, f"nothing rendered for cluster {cluster} under {es.render_dir}"
        for obj in objects:
            key = _key(obj)
            assert key in written, f"{cluster}: {key} not rendered; rendered: {sorted(written)}"
            assert _normalize(written[key]) == _normalize(obj), f"{cluster}: {key} differs from modelplane.render"


def test_scaling_keeps_existing_replicas_and_removes_the_reference_victims(make_stack, tmp_path):
    fleet_dir = scaling_fleet(tmp_path / "fleet", 2)
    es = make_stack(fleet_dir)

    def up(replicas: int) -> dict[str, tuple[str, int]]:
        scaling_fleet(fleet_dir, replicas)
        result = es.stack.up(color="never")
        assert result.summary.result == "succeeded", result.stdout
        return _deployment_replicas(result.outputs)

    two = up(2)
    ref2 = reference_placement(fleet_dir)
    assert two == {r.name: (r.cluster, r.index) for r in ref2.deployments[0].replicas}
    assert sorted(two.values()) == [("alpha", 0), ("beta", 0)]

    four = up(4)
    for name, where in two.items():
        assert four.get(name) == where, f"replica {name} moved or was renamed: {where} -> {four.get(name)}"
    assert len(four) == 4
    ref4 = reference_placement(fleet_dir, ref2)
    assert four == {r.name: (r.cluster, r.index) for r in ref4.deployments[0].replicas}

    three = up(3)
    ref3 = reference_placement(fleet_dir, ref4)
    victims = set(four) - {r.name for r in ref3.deployments[0].replicas}
    assert set(four) - set(three) == victims
    # The reference's rule (semantics §2.7): most-loaded cluster, later name, highest index -> beta#1.
    assert [four[v] for v in victims] == [("beta", 1)]
    for name, where in three.items():
        assert four[name] == where
    written = _rendered(es.render_dir, "beta")
    gone = [k for k in written if any(v in k[3] for v in victims)]
    assert not gone, f"scaled-down replica still rendered: {gone}"


def test_policy_pack_fails_violating_manifests_and_passes_clean_ones(make_stack):
    from pulumi import automation as auto

    pack = str(REPO / "policy-packs" / "modelplane")
    clean = make_stack(KIND_EXAMPLE)
    result = clean.stack.preview(color="never", policy_packs=[pack])
    assert re.search(r"✅ modelplane@v\S+ \(local: .*policy-packs/modelplane\)", result.stdout), result.stdout
    assert "[mandatory]" not in result.stdout

    bad = make_stack(REPO / "examples" / "silent-failures")
    with pytest.raises(auto.errors.CommandError) as failed:
        bad.stack.preview(color="never", policy_packs=[pack])
    text = str(failed.value)
    assert re.search(r"❌ modelplane@v\S+", text), text
    failed_policies = set(re.findall(r"\[mandatory\]\s+(\S+)", text))
    # examples/silent-failures carries one document per silent failure (docs/policies.md)
    assert {"usable-gpu-memory", "replicas-fully-scheduled", "secrets"} <= failed_policies, failed_policies
    assert not bad.render_dir.exists() or not any(bad.render_dir.rglob("*.yaml"))


def test_stack_export_holds_no_secret_in_plain_text(make_stack):
    from pulumi import automation as auto

    # examples/byo has a ModelEndpoint whose API key is the secret `ml-team/together-key`.
    es = make_stack(REPO / "examples" / "byo")
    canaries = ["hf_enginetest_7Qx9PlainTextCanary", "sk-enginetest-4Zr8PlainTextCanary"]
    es.stack.set_config("modelplane:hfToken", auto.ConfigValue(canaries[0], secret=True))
    es.stack.set_config("modelplane:endpointApiKeys", auto.ConfigValue(
        json.dumps({"ml-team/together-key": canaries[1]}), secret=True))
    result = es.stack.up(color="never")
    assert result.summary.result == "succeeded", result.stdout
    exported = es.export_text()
    assert "ciphertext" in exported, "no encrypted secret in the state: the canaries never reached a resource"
    for canary in canaries:
        assert canary not in exported, f"secret {canary[:12]}... is in plain text in `pulumi stack export`"
        assert canary not in json.dumps(json.loads(exported))  # nor hidden behind JSON escaping
        assert canary not in es.config_file.read_text()
