"""Loader benchmark: reading manifests and JSON inputs, against libyaml in the same run.

    .venv/bin/python benchmarks/loader.py                       # 1,000 clusters, 10,000 replicas
    .venv/bin/python benchmarks/loader.py --clusters 100 --deployments 100

Generates the scale benchmark's fleet shape (C clusters of 2 pools, D deployments of 10 replicas,
1- and 8-GPU classes) as two YAML files, then times, best of --repeat runs:

* libyaml: `yaml.load_all(CSafeLoader)` over the same text — the baseline a loader can
  not beat by much (it builds the same Python values);
* pure PyYAML: `yaml.safe_load_all`, what the loader used before;
* load_manifests: ours end to end (read, parse, validate, cross-check);
* plan --json output: `json.dumps` compact (what `plan --json` prints) and with indent=2;
* --previous input: reading that JSON back (`commands.inputs.read_previous`).

Ratios are against libyaml measured in the same run, so they hold across machines.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import yaml

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from modelplane.api import load_manifests  # noqa: E402
from modelplane.scheduler import place_fleet  # noqa: E402
from tests.manifests import cluster, deployment, engine, gpu_class, pool, standalone, to_yaml  # noqa: E402


def write_fleet(root: Path, clusters: int, deployments: int) -> list[Path]:
    platform = [gpu_class("g1", 1, "81559Mi"), gpu_class("g8", 8, "81559Mi")]
    platform += [cluster(f"c-{c:04d}", pool("pool-0", "g8", 4), pool("pool-1", "g1", 4),
                         labels={"example.org/region": "us" if c % 2 else "eu"}) for c in range(clusters)]
    models = [deployment(f"model-{i:04d}", 10, engine("main", standalone(gpus=1 + i % 2)),
                         namespace=f"team-{i % 7}") for i in range(deployments)]
    files = [root / "platform.yaml", root / "models.yaml"]
    files[0].write_text(to_yaml(platform))
    files[1].write_text(to_yaml(models))
    return files


def best(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clusters", type=int, default=1000)
    parser.add_argument("--deployments", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    if not getattr(yaml, "__with_libyaml__", False):
        sys.exit("PyYAML was built without libyaml: no baseline to compare with")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        files = write_fleet(root, args.clusters, args.deployments)
        texts = [f.read_text() for f in files]
        size = sum(len(t) for t in texts)
        print(f"fleet: {args.clusters} clusters x 2 pools, {args.deployments} deployments x 10 replicas, "
              f"{size / 1e6:.2f} MB of YAML")
        libyaml = best(lambda: [list(yaml.load_all(t, Loader=yaml.CSafeLoader)) for t in texts], args.repeat)
        pure = best(lambda: [list(yaml.load_all(t, Loader=yaml.SafeLoader)) for t in texts], 1)
        fleet = load_manifests(root)
        ours = best(lambda: load_manifests(root), args.repeat)
        rows = [("libyaml parse (baseline)", libyaml), ("pure PyYAML parse (the old loader's)", pure),
                ("load_manifests (read+parse+validate)", ours)]
        placement = place_fleet(fleet).to_json()
        compact = best(lambda: json.dumps(placement, separators=(",", ":")), args.repeat)
        indented = best(lambda: json.dumps(placement, indent=2), args.repeat)
        previous = root / "previous.json"
        previous.write_text(json.dumps(placement))
        try:
            from modelplane.commands.inputs import read_previous
            reread = best(lambda: read_previous(str(previous)), args.repeat)
        except ImportError:
            reread = float("nan")
        rows += [("plan --json: json.dumps compact", compact), ("plan --json: json.dumps indent=2", indented),
                 ("--previous: read_previous", reread)]
        width = max(len(r[0]) for r in rows)
        for label, seconds in rows:
            print(f"  {label:<{width}}  {seconds:7.3f} s  {seconds / libyaml:6.2f}x libyaml")


if __name__ == "__main__":
    main()
