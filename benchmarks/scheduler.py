"""Scheduler benchmark: placement time and peak memory over generated fleets, and `plan`
end to end against a process that only parses the same files.

    .venv/bin/python benchmarks/scheduler.py                 # the default grid
    .venv/bin/python benchmarks/scheduler.py --clusters 1000 --replicas 10000
    .venv/bin/python benchmarks/scheduler.py --capacity 0.5  # half the demand: shortfalls
    .venv/bin/python benchmarks/scheduler.py --clusters 1000 --replicas 10000 --against d1a64a4
    .venv/bin/python benchmarks/scheduler.py --fleet oversubscribed --clusters 1000 --replicas 10000 --against d1a64a4
    .venv/bin/python benchmarks/scheduler.py --e2e --against d1a64a4   # plan vs the libyaml floor

Grid: a fleet of C clusters, each with P pools (1-GPU and 8-GPU classes, two regions),
and D = ceil(R / 100) deployments sharing R replicas (a mix of 1-GPU, 4-GPU and
Leader+Worker gang engines, some pinned to a region). Pool sizes are chosen so the
fleet holds `capacity` x the demand. Only `place_fleet` is timed (loading the manifests
is not), in a fresh process per run; peak memory is measured with tracemalloc in a
separate run.

`--against REV` measures the same fleets, in the same run, on the scheduler as it was at
REV (exported with `git archive` into a temporary directory), alternating the two, and
says whether both placed the fleet byte for byte alike.

`--e2e`: `python -m modelplane plan` and `plan --json`, process start to last byte (wall
and CPU seconds), on
the scale benchmark's 1,000-cluster fleet (benchmarks/scale_fleet.py, sized at 1.25x its
demand) and on an oversubscribed one (benchmarks/oversubscribed_fleet.py: demand 1.3x
capacity, shapes that fit nowhere, somewhere and everywhere), each against a fresh
process that only parses the same YAML files with libyaml (benchmarks/scale_plan.py).
Both trees are byte-compiled first, as an installed package is (the floor's PyYAML is).
The goal: within 3x that floor on both.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

import oversubscribed_fleet  # noqa: E402
import scale_fleet  # noqa: E402
import scale_plan  # noqa: E402

from tests.manifests import (  # noqa: E402
    cluster,
    deployment,
    engine,
    gpu_class,
    mem_at_least,
    member,
    pool,
    request,
    standalone,
)

GRID = [(10, 100), (10, 1000), (100, 1000), (100, 10000), (1000, 1000), (1000, 10000)]
E2E_GOAL = 3.0          # plan within 3x of parsing the same files: scarcity must be fast


def shapes(i: int) -> tuple[dict, int]:
    """(engine, nodes it takes in Node accounting) for deployment i."""
    kind = i % 4
    if kind == 3:
        gang = engine("main", member("Leader", request("gpu", 8, mem_at_least(40))),
                      member("Worker", request("gpu", 8, mem_at_least(40)), nodes=2))
        return gang, 3
    gpus = 4 if kind == 2 else 1
    return engine("main", standalone(gpus=gpus, min_gib=40)), 1


def generate(clusters: int, pools: int, replicas: int, capacity: float) -> list[dict]:
    deployments = max(1, math.ceil(replicas / 100))
    docs: list[dict] = [gpu_class("g1", 1, "81559Mi"), gpu_class("g8", 8, "81559Mi")]
    demand = 0
    deps = []
    for i in range(deployments):
        n = replicas // deployments + (1 if i < replicas % deployments else 0)
        eng, nodes = shapes(i)
        demand += n * nodes
        selector = {"region": "us" if i % 2 else "eu"} if i % 5 == 0 else None
        deps.append(deployment(f"model-{i:04d}", n, eng, namespace=f"team-{i % 7}",
                               selector=selector))
    # at least a gang (3 nodes) per pool, or gangs could never place anywhere
    per_pool = max(3, math.ceil(demand * capacity / (clusters * pools)))
    for c in range(clusters):
        ps = [pool(f"pool-{p}", "g8" if p % 2 == 0 else "g1", per_pool) for p in range(pools)]
        docs.append(cluster(f"cluster-{c:04d}", *ps,
                            labels={"region": "us" if c % 2 else "eu", "tier": f"t{c % 3}"}))
    return docs + deps


# One measurement in a fresh interpreter whose `modelplane` is the tree at argv[1]: the
# same documents placed `repeat` times (best kept), then once under tracemalloc.
WORKER = """
import gc, hashlib, json, math, sys, time, tracemalloc
root, docs, accounting, repeat = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
sys.path.insert(0, root)
from modelplane.api import load_documents
from modelplane.scheduler import place_fleet
with open(docs) as fh:
    fleet = load_documents(json.load(fh))
best = math.inf
for _ in range(repeat):
    gc.collect()
    t0 = time.perf_counter()
    result = place_fleet(fleet, accounting=accounting)
    best = min(best, time.perf_counter() - t0)
gc.collect()
tracemalloc.start()
place_fleet(fleet, accounting=accounting)
_, peak = tracemalloc.get_traced_memory()
tracemalloc.stop()
doc = result.to_json()
where = [[d["name"], [[r["cluster"], r["index"], r["engines"]] for r in d["replicas"]]] for d in doc["deployments"]]
print(json.dumps({"seconds": best, "peak": peak, "deployments": len(result.deployments),
                  "placed": sum(len(d.replicas) for d in result.deployments),
                  "json": hashlib.sha256(json.dumps(doc, separators=(",", ":")).encode()).hexdigest(),
                  "replicas": hashlib.sha256(json.dumps(where).encode()).hexdigest()}))
"""


def run_worker(root: Path, docs: Path, accounting: str, repeat: int) -> dict:
    out = subprocess.run([sys.executable, "-c", WORKER, str(root), str(docs), accounting, str(repeat)],
                         cwd=root, env={**os.environ, "PYTHONPATH": str(root)}, capture_output=True, text=True,
                         check=False)
    if out.returncode != 0:
        raise RuntimeError(f"benchmark worker on {root} failed: {out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def measure(roots: dict[str, Path], docs: list[dict], accounting: str, repeat: int, rounds: int,
            work: Path) -> dict[str, dict]:
    """Per tree, the best of `rounds` x `repeat` placements, the trees alternating."""
    path = work / "fleet.json"
    path.write_text(json.dumps(docs))
    best: dict[str, dict] = {}
    for _ in range(rounds):
        for label, root in roots.items():
            got = run_worker(root, path, accounting, repeat)
            if label not in best or got["seconds"] < best[label]["seconds"]:
                best[label] = got
    return best


@contextmanager
def exported(rev: str | None) -> Iterator[Path | None]:
    """The repository's tree at `rev` in a temporary directory (removed afterwards)."""
    if rev is None:
        yield None
        return
    with tempfile.TemporaryDirectory(prefix="modelplane-baseline-") as tmp:
        archive = subprocess.run(["git", "-C", str(REPO), "archive", rev], capture_output=True, check=False)
        if archive.returncode != 0:
            raise SystemExit(f"cannot export {rev}: {archive.stderr.decode(errors='replace').strip()}")
        subprocess.run(["tar", "-x", "-C", tmp], input=archive.stdout, check=True)
        yield Path(tmp)


def grid(args: argparse.Namespace, roots: dict[str, Path], work: Path) -> None:
    if args.clusters or args.replicas:
        points = [(c, r) for c in (args.clusters or [100]) for r in (args.replicas or [1000])]
    else:
        points = GRID
    modes = ["Device", "Node"] if args.accounting == "both" else [args.accounting]
    labels = list(roots)
    what = (f"pools/cluster={args.pools} capacity={args.capacity}x demand" if args.fleet == "grid"
            else f"{args.fleet} fleet")
    print(f"{what}; best of {args.rounds} x {args.repeat}, "
          "each in a fresh process" + (f"; trees: {', '.join(labels)}" if len(labels) > 1 else ""))
    head = f"{'mode':<7}{'clusters':>9}{'replicas':>9}{'deps':>6}{'placed':>8}{'seconds':>10}{'peak MiB':>10}"
    if len(labels) > 1:
        head += f"{labels[1] + ' s':>12}{'MiB':>7}{'new/old':>9}  same placement / JSON"
    print(head)
    for mode in modes:
        for clusters, replicas in points:
            if args.fleet == "scale":
                docs = scale_fleet.fleet(clusters, replicas // 10)
            elif args.fleet == "oversubscribed":
                docs = oversubscribed_fleet.fleet(clusters, replicas // 10)
            else:
                docs = generate(clusters, args.pools, replicas, args.capacity)
            got = measure(roots, docs, mode, args.repeat, args.rounds, work)
            new = got[labels[0]]
            line = (f"{mode:<7}{clusters:>9}{replicas:>9}{new['deployments']:>6}{new['placed']:>8}"
                    f"{new['seconds']:>10.3f}{new['peak'] / 2**20:>10.1f}")
            if len(labels) > 1:
                old = got[labels[1]]
                line += (f"{old['seconds']:>12.3f}{old['peak'] / 2**20:>7.1f}{new['seconds'] / old['seconds']:>9.2f}  "
                         f"{'yes' if new['replicas'] == old['replicas'] else 'NO'} / "
                         f"{'yes' if new['json'] == old['json'] else 'no'}")
            print(line, flush=True)


def e2e(args: argparse.Namespace, roots: dict[str, Path], work: Path) -> None:
    fleets = {"scale fleet (1.25x)": scale_fleet.fleet(args.e2e_clusters, args.e2e_clusters),
              "oversubscribed (1.3x)": oversubscribed_fleet.fleet(args.e2e_clusters, args.e2e_clusters)}
    print(f"\nplan end to end, {args.e2e_clusters} clusters x {args.e2e_clusters * 10} replicas; {args.repeat} "
          "rounds of fresh processes, the trees alternating; seconds: the best; x parse: the median of each run "
          "over the libyaml floor of its round")
    print(f"{'fleet':<24}{'what':<24}{'seconds':>9}{'x parse':>9}{'CPU s':>8}{'x parse':>9}{'RSS MiB':>9}"
          f"{'out MB':>8}  goal")
    for root in roots.values():
        _byte_compile(root)
    for name, docs in fleets.items():
        directory = work / name.split()[0]
        scale_fleet.write(docs, directory)
        runs: dict[str, list[tuple[scale_plan.Timed, float]]] = {}
        sizes: dict[str, int] = {}
        commands = {"libyaml parse only": (REPO, [sys.executable, "-c", scale_plan.PARSE_ONLY, str(directory)])}
        for label, root in roots.items():
            commands[f"plan ({label})"] = (root, [sys.executable, "-m", "modelplane", "plan", str(directory)])
            commands[f"plan --json ({label})"] = (root, [sys.executable, "-m", "modelplane", "plan", "--json",
                                                         str(directory)])
        for _ in range(args.repeat):
            for what, (root, argv) in commands.items():
                out = work / "out"
                runs.setdefault(what, []).append(_timed(root, argv, out))
                sizes[what] = out.stat().st_size
        floors = runs["libyaml parse only"]
        for what, timed in runs.items():
            seconds, cpu = min(t.seconds for t, _ in timed), min(c for _, c in timed)
            # Each run against the floor measured beside it (the machine's speed drifts
            # between rounds), the median of those ratios.
            ratio = statistics.median(t.seconds / f.seconds for (t, _), (f, _) in zip(timed, floors, strict=True))
            cpu_ratio = statistics.median(c / fc for (_, c), (_, fc) in zip(timed, floors, strict=True))
            goal = ""
            if what.startswith("plan") and what.endswith(f"({next(iter(roots))})"):
                goal = f"<= {E2E_GOAL}x: {'met' if ratio <= E2E_GOAL else 'NOT met'}"
            print(f"{name:<24}{what:<24}{seconds:>9.2f}{ratio:>9.2f}{cpu:>8.2f}{cpu_ratio:>9.2f}"
                  f"{max(t.peak_rss for t, _ in timed) / 2**20:>9.0f}{sizes[what] / 1e6:>8.1f}  {goal}", flush=True)


def _byte_compile(root: Path) -> None:
    """Compile a tree's modules once before it is timed, as pip does when it installs a
    package and as any checkout has after its first run. The floor's PyYAML and the standard
    library come compiled; with PYTHONDONTWRITEBYTECODE set (as on the project's machines)
    every `plan` would otherwise compile ~75 of our modules again, ~0.12 s the floor never pays,
    and a `--against` tree (fresh from `git archive`) would pay it on every run."""
    packages = [str(root / d) for d in ("modelplane",) if (root / d).is_dir()]
    subprocess.run([sys.executable, "-m", "compileall", "-q", "-j", "0", *packages], check=True,
                   stdout=subprocess.DEVNULL)


def _timed(root: Path, argv: list[str], stdout: Path) -> tuple[scale_plan.Timed, float]:
    """Wall time from spawn to exit and peak RSS, and the CPU seconds the process used
    (less disturbed than wall time by the other work of a shared machine)."""
    env = {**os.environ, "PYTHONPATH": str(root)}
    with stdout.open("wb") as out:
        start = scale_plan.time.perf_counter()
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.PIPE, cwd=root, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = scale_plan.time.perf_counter() - start
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    if proc.stderr:
        proc.stderr.close()
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{' '.join(argv)} failed: {err[-2000:]}")
    return scale_plan.Timed(seconds, usage.ru_maxrss * 1024), usage.ru_utime + usage.ru_stime


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--clusters", type=int, nargs="*", help="cluster counts (default: grid)")
    ap.add_argument("--replicas", type=int, nargs="*", help="replica counts (default: grid)")
    ap.add_argument("--pools", type=int, default=2, help="pools per cluster (default 2)")
    ap.add_argument("--capacity", type=float, default=1.25,
                    help="fleet capacity as a multiple of demand (default 1.25)")
    ap.add_argument("--accounting", choices=["Device", "Node", "both"], default="both")
    ap.add_argument("--fleet", choices=["grid", "scale", "oversubscribed"], default="grid",
                    help="the fleets: this benchmark's generator (default), the scale benchmark's, or the "
                         "oversubscribed one (replicas / 10 deployments of 10; --pools and --capacity apply to grid)")
    ap.add_argument("--repeat", type=int, default=3, help="timed runs per process; the best is kept")
    ap.add_argument("--rounds", type=int, default=2, help="fresh processes per tree, alternating (default 2)")
    ap.add_argument("--against", metavar="REV", help="also measure the scheduler at this commit, same run")
    ap.add_argument("--e2e", action="store_true", help="plan end to end against the libyaml floor instead")
    ap.add_argument("--e2e-clusters", type=int, default=1000, help="clusters of the --e2e fleets (default 1000)")
    args = ap.parse_args(argv)
    with exported(args.against) as baseline, tempfile.TemporaryDirectory(prefix="modelplane-bench-") as tmp:
        roots = {"this tree": REPO, **({args.against: baseline} if baseline is not None else {})}
        if args.e2e:
            e2e(args, roots, Path(tmp))
        else:
            grid(args, roots, Path(tmp))
    return 0


if __name__ == "__main__":
    sys.exit(main())
