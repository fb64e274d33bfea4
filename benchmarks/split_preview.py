"""`python -m modelplane preview` of a one-deployment change to a split fleet (issue 31):
the fleet stack's preview, the plan diff, and the previews of the shard stacks it reaches.

    eval "$(scripts/engine-env)"
    .venv/bin/python benchmarks/split_preview.py --clusters 200 --shard-size 50       # end to end
    .venv/bin/python benchmarks/split_preview.py --clusters 10000 --fleet-only         # the fleet stack

Fleets come from benchmarks/scale_fleet.py (C clusters, C deployments x 10 replicas, the
render stack). End to end: `modelplane up --skip-checkpoints` of the fleet stack and every
shard stack (not timed as the result), then one deployment's engine container changes
(an env var: one manifest, the placement unchanged) and `modelplane preview` is timed:
wall, CPU and peak memory (PSS) of the whole process tree, and each stack's time from the
driver's lines. `--fleet-only`: only the fleet stack is applied and previewed after the
change, as the driver runs it (shares file, no checkpoints): at 10,000 clusters the shard
stacks' 660,000 Kubernetes objects cannot be applied on a 2-core machine in reasonable
time, and the fleet stack's preview is the part of a split preview that grows with the
fleet (the shards it reaches are a constant number of fixed-size stacks). Absolute
seconds: say the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import scale_engine  # noqa: E402
import scale_fleet  # noqa: E402
from proctree import TreeRun, run_tree  # noqa: E402

REPO = scale_engine.REPO
MIB = 2**20
GOAL_SECONDS = 60.0          # issue 31: the preview of a one-deployment change at 10,000 clusters
CHANGED = "model-0001"


def write_fleet(directory: Path, clusters: int, env_value: str | None) -> None:
    docs = scale_fleet.fleet(clusters, clusters)
    if env_value is not None:
        target = next(d for d in docs if d["kind"] == "ModelDeployment" and d["metadata"]["name"] == CHANGED)
        container = target["spec"]["template"]["spec"]["engines"][0]["members"][0]["template"]["spec"]["containers"][0]
        container["env"] = [{"name": "MAX_NUM_SEQS", "value": env_value}]
    for old in directory.glob("*.yaml"):
        old.unlink()
    scale_fleet.write(docs, directory)


def _checked(label: str, run: TreeRun) -> TreeRun:
    if run.timed_out:
        raise SystemExit(f"{label}: timed out after {run.wall:.0f} s")
    if run.returncode != 0:
        raise SystemExit(f"{label} failed:\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}")
    return run


def _row(label: str, run: TreeRun) -> dict[str, Any]:
    cpu = ", ".join(f"{k} {v:.1f}" for k, v in sorted(run.cpu.items(), key=lambda kv: -kv[1]) if v >= 0.5)
    print(f"  {label:<46}{run.wall:>8.1f} s wall  {run.cpu_total:>7.1f} s CPU  PSS {run.peak_memory / MIB:>6.0f} MiB"
          f"   CPU by process: {cpu}")
    return {"label": label, "seconds": run.wall, "cpu": run.cpu_total, "cpu_by_role": run.cpu,
            "peak_mib": run.peak_memory / MIB}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--clusters", type=int, default=200)
    ap.add_argument("--shard-size", type=int, default=50, help="clusters per shard stack (default 50)")
    ap.add_argument("--parallel", type=int, default=2, help="shard stacks at once (default 2)")
    ap.add_argument("--fleet-only", action="store_true", help="apply and preview the fleet stack only")
    ap.add_argument("--timeout", type=float, default=3600, help="per engine run, seconds")
    ap.add_argument("--json", type=Path, help="write the results here")
    args = ap.parse_args(argv)
    if args.clusters < 2 or args.shard_size < 1 or args.parallel < 1:
        print("error: --clusters must be at least 2, --shard-size and --parallel at least 1", file=sys.stderr)
        return 2
    env = scale_engine.engine_env()
    results: dict[str, Any] = {"clusters": args.clusters, "shard_size": args.shard_size, "parallel": args.parallel,
                               "fleet_only": args.fleet_only, "machine": f"{platform.machine()}, {os.cpu_count()} "
                               "cores (shared with other work)", "rows": []}
    print(f"# split preview of a one-deployment change: {args.clusters} clusters, {10 * args.clusters} replicas, "
          f"shards of {args.shard_size}, {args.parallel} at once; {results['machine']}")
    with scale_engine.workspace(env) as ws, tempfile.TemporaryDirectory(prefix="modelplane-split-bench-") as tmp:
        fleet = Path(tmp) / "fleet"
        t0 = time.perf_counter()
        write_fleet(fleet, args.clusters, None)
        print(f"  fleet written in {time.perf_counter() - t0:.1f} s")
        config = scale_engine.render_stack_config(fleet, ws.root / "render",
                                                  split={"role": "fleet", "shardSize": args.shard_size})
        stack = ws.init(REPO, config, REPO / "stacks")
        run_env = {**ws.env, "PYTHONPATH": str(REPO)}
        driver = [sys.executable, "-m", "modelplane"]
        if args.fleet_only:
            up = ["pulumi", "up", "--yes", "--skip-preview", "--stack", stack, "--non-interactive", "--color",
                  "never", "--suppress-outputs", "--suppress-progress"]
            results["rows"].append(_row("up: the fleet stack", _checked("up", run_tree(
                up, cwd=str(REPO), env={**run_env, **scale_engine.SKIP_CHECKPOINTS}, timeout=args.timeout))))
        else:
            up = [*driver, "up", "--stack", stack, "--parallel", str(args.parallel), "--skip-checkpoints"]
            run = _checked("up", run_tree(up, cwd=str(REPO), env=run_env, timeout=args.timeout))
            shards = len(re.findall(r"^\[", run.stdout, re.M)) - 1
            results["rows"].append(_row(f"up: fleet stack and {shards} shards", run))
        write_fleet(fleet, args.clusters, "17")
        if args.fleet_only:
            shares = Path(tmp) / "shares.json"
            preview = ["pulumi", "preview", "--stack", stack, "--non-interactive", "--color", "never",
                       "--suppress-outputs"]
            run = _checked("preview", run_tree(preview, cwd=str(REPO), timeout=args.timeout, env={
                **run_env, **scale_engine.SKIP_CHECKPOINTS, "MODELPLANE_SHARES_FILE": str(shares)}))
            row = _row("preview after the change: the fleet stack", run)
            row["shares_file_mb"] = shares.stat().st_size / 1e6
            print(f"  the shares file it writes (what every shard previewed reads): {row['shares_file_mb']:.1f} MB")
        else:
            preview = [*driver, "preview", "--stack", stack, "--parallel", str(args.parallel)]
            run = _checked("preview", run_tree(preview, cwd=str(REPO), env=run_env, timeout=args.timeout))
            row = _row("preview after the change: driver, end to end", run)
            stacks = {m[0]: float(m[1]) for m in re.findall(r"^\[\d+/\d+\] (\S+): ok in ([\d.]+) s", run.stdout, re.M)}
            unchanged = re.search(r"^(\d+) of (\d+) shard stacks unchanged", run.stdout, re.M)
            row["stacks"] = stacks
            row["unchanged"] = int(unchanged.group(1)) if unchanged else 0
            row["shards"] = int(unchanged.group(2)) if unchanged else len(stacks) - 1
            for name, seconds in stacks.items():
                print(f"    {name:<44}{seconds:>8.1f} s")
            for line in run.stdout.splitlines():
                if " shard stacks unchanged by the plan diff" in line or line.startswith("previewing "):
                    print(f"    driver: {line[:400]}")
            print(f"    shard stacks unchanged by the plan diff, not previewed: {row['unchanged']} of {row['shards']}")
        results["rows"].append(row)
        verdict = "met" if row["seconds"] <= GOAL_SECONDS else "missed"
        print(f"  goal: <= {GOAL_SECONDS:.0f} s at 10,000 clusters; this run ({args.clusters} clusters): "
              f"{row['seconds']:.1f} s ({verdict} at this size)")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
