import argparse
import json
import textwrap

from modelplane.checks import CHECKS
from modelplane.commands import lint

from .fleets import base, existing_cluster, h100_class

# Every registered check runs by default (the count follows the registry, not a number here).
N = len(CHECKS)


def run(*argv: str) -> int:
    parser = argparse.ArgumentParser()
    lint.add_parser(parser.add_subparsers())
    args = parser.parse_args(["lint", *argv])
    return args.func(args)


def write(tmp_path, *docs: str):
    (tmp_path / "fleet.yaml").write_text("---".join(textwrap.dedent(d) for d in docs))
    return str(tmp_path)


def test_clean_fleet_exits_zero(tmp_path, capsys):
    assert run(write(tmp_path, *base())) == 0
    assert capsys.readouterr().out == f"{N} checks: 0 mandatory, 0 advisory findings\n"


def test_mandatory_finding_exits_one_and_prints_its_level(tmp_path, capsys):
    d = write(tmp_path, *base(**{"class": h100_class("80Gi")}))
    assert run(d, "-o", "wide") == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"[mandatory] usable-gpu-memory: InferenceClass/h100 ({d}/fleet.yaml#0) "
                             "spec.devices[0].capacity.memory: declares 80Gi")
    assert out[-1] == f"{N} checks: 1 mandatory, 0 advisory findings"


def test_advisory_only_exits_zero(tmp_path, capsys):
    d = write(tmp_path, *base(cluster=existing_cluster(nodes=3)))
    (tmp_path / "observed.json").write_text(json.dumps({"byo": {"h100": 2}}))
    assert run(d, "--observed", str(tmp_path / "observed.json"), "-o", "wide") == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("[advisory] declared-capacity: InferenceCluster/byo")
    assert out[-1] == f"{N} checks: 0 mandatory, 1 advisory finding"


def test_config_lowers_and_disables_levels(tmp_path, capsys):
    d = write(tmp_path, *base(**{"class": h100_class("80Gi")}))
    config = tmp_path / "policy-config.json"
    config.write_text(json.dumps({"usable-gpu-memory": {"enforcementLevel": "advisory"}}))
    assert run(d, "--config", str(config), "-o", "wide") == 0
    assert capsys.readouterr().out.splitlines()[0].startswith("[advisory] usable-gpu-memory:")
    config.write_text(json.dumps({"usable-gpu-memory": "disabled"}))
    assert run(d, "--config", str(config)) == 0
    assert capsys.readouterr().out == f"{N - 1} checks: 0 mandatory, 0 advisory findings\n"


def test_invalid_input_exits_two(tmp_path, capsys):
    bad = "apiVersion: modelplane.ai/v1alpha1\nkind: InferenceClass\nmetadata: {name: x}\n"
    (tmp_path / "bad.yaml").write_text(bad)
    assert run(str(tmp_path)) == 2
    assert capsys.readouterr().err.startswith("error: ")
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"no-such-policy": "advisory"}))
    good = tmp_path / "good"
    good.mkdir()
    assert run(write(good, *base()), "--config", str(config)) == 2
    assert "unknown policy 'no-such-policy'" in capsys.readouterr().err


def test_python_dash_m_modelplane_lint(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    bad = subprocess.run([sys.executable, "-m", "modelplane", "lint", "examples/silent-failures"],
                         cwd=root, capture_output=True, text=True, timeout=120)
    assert bad.returncode == 1, bad.stderr
    # the advisories: fabric-multi-node-tcp, and kind-node-digest on its bare (deadlocking) kindest/node tag
    assert bad.stdout.splitlines()[-1] == f"{N} checks: 10 mandatory, 2 advisory findings"
    good = subprocess.run([sys.executable, "-m", "modelplane", "lint", write(tmp_path, *base())],
                          cwd=root, capture_output=True, text=True, timeout=120)
    assert (good.returncode, good.stdout) == (0, f"{N} checks: 0 mandatory, 0 advisory findings\n")
