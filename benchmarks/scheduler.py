"""Scheduler benchmark: placement time and peak memory over generated fleets, and `plan`
end to end against a process that only parses the same files.

    .venv/bin/python benchmarks/scheduler.py                 # the default grid
    .venv/bin/python benchmarks/scheduler.py --clusters 1000 --replicas 10000
    .venv/bin/python benchmarks/scheduler.py --capacity 0.5  # half the demand: shortfalls
    .venv/bin/python benchmarks/scheduler.py --clusters 1000 --replicas 10000 --against d1a64a4
    .venv/bin/python benchmarks/scheduler.py --fleet oversubscribed --clusters 1000 --replicas 10000 --against d1a64a4
    .venv/bin/python benchmarks/scheduler.py --e2e --against d1a64a4   # plan vs the libyaml floor
    .venv/bin/python benchmarks/scheduler.py --e2e --e2e-clusters 1000 3000 10000 --repeat 3   # issue 31

Grid: a fleet of C clusters, each with P pools (1-GPU and 8-GPU classes, two regions),
and D = ceil(R / 100) deployments sharing R replicas (a mix of 1-GPU, 4-GPU and
Leader+Worker gang engines, some pinned to a region). Pool sizes are chosen so the
fleet holds `capacity` x the demand. Only `place_fleet` is timed (loading the manifests
is not), in a fresh process per run; peak memory is measured with tracemalloc in a
separate run.

`--against REV` measures the same fleets, in the same run, on the scheduler as it was at
REV (exported with `git archive` into a temporary directory), alternating the two, and
says whether both placed the fleet byte for byte alike.

`--e2e`: `python -m modelplane plan` and `plan --json`, process start to last byte (CPU
seconds, wall, peak RSS, bytes out), Device and Node accounting, on the scale benchmark's
fleet of C clusters and 10*C replicas (benchmarks/scale_fleet.py, sized at 1.25x its demand)
and on an oversubscribed one (benchmarks/oversubscribed_fleet.py: demand 1.3x capacity,
shapes that fit nowhere, somewhere and everywhere), for each `--e2e-clusters` C, each
against a fresh process that only parses the same YAML files with libyaml
(benchmarks/scale_plan.py), the commands alternating round by round. Both trees are
byte-compiled first, as an installed package is (the floor's PyYAML is). The goals (issue
31): within 3x that floor (2.5x short of GPUs at 1,000 clusters), peak RSS <= 1 GiB, JSON <=
100 MB; with two or more sizes, the place phase alone per size and its growth exponent
(goal <= 1.1).
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
from collections.abc import Callable, Iterator, Mapping
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


# One fresh interpreter: the fleet loaded as `plan` loads it, then `place_fleet` timed alone in
# CPU seconds with the collector paused (as plan runs it), best of `repeat`.
PLACE_ONLY = """
import json, math, sys, time
from modelplane.api import load_manifests
from modelplane.gcpause import gc_paused
from modelplane.scheduler import place_fleet
fleet = load_manifests(sys.argv[1])
best = math.inf
for _ in range(int(sys.argv[3])):
    with gc_paused():
        t0 = time.process_time()
        place_fleet(fleet, accounting=sys.argv[2])
        best = min(best, time.process_time() - t0)
print(json.dumps({"cpu": best}))
"""
E2E_SHORT_GOAL = (1000, 2.5)      # issue 31: at 1,000 clusters short of GPUs, within 2.5x the floor
E2E_RSS_GOAL = 2**30              # issue 31: peak RSS at most 1 GiB
E2E_JSON_GOAL = 100e6             # issue 31: plan --json at most 100 MB
E2E_EXPONENT_GOAL = 1.1           # issue 31: the place phase grows at most as clusters^1.1
E2E_GOALS_FROM = 1000             # the goals are for fleets this large (below, start-up is most of a plan)


def e2e(args: argparse.Namespace, roots: dict[str, Path], work: Path) -> None:
    """`plan` and `plan --json` end to end per fleet size, fleet (roomy, short) and accounting,
    against the libyaml floor of the same files in the same round; then the place phase alone
    per size and its growth exponent."""
    sizes = sorted(args.e2e_clusters)
    modes = ["Device", "Node"] if args.accounting == "both" else [args.accounting]
    print(f"\nplan end to end: C clusters, 10*C replicas; {args.repeat} rounds of fresh processes, every command "
          "of a fleet alternating; CPU s: the least; x floor: the median over the rounds of CPU / the floor's "
          "CPU in the same round (spread: least-most); RSS: the most; goals (issue 31): x floor <= "
          f"{E2E_GOAL} (<= {E2E_SHORT_GOAL[1]} short at {E2E_SHORT_GOAL[0]}), RSS <= {E2E_RSS_GOAL / 2**30:.0f} GiB, "
          f"JSON <= {E2E_JSON_GOAL / 1e6:.0f} MB, from {E2E_GOALS_FROM} clusters")
    print(f"{'fleet':<16}{'clusters':>9}  {'what':<34}{'CPU s':>8}{'x floor':>9}{'spread':>12}{'wall s':>8}"
          f"{'RSS MiB':>9}{'out MB':>8}  goals")
    for root in roots.values():
        _byte_compile(root)
    fleets: dict[str, Callable[[int], list[dict]]] = {
        "roomy (1.25x)": lambda c: scale_fleet.fleet(c, c),
        "short (1.3x)": lambda c: oversubscribed_fleet.fleet(c, c)}
    dirs: dict[tuple[str, int], Path] = {}
    verdicts: list[bool] = []
    for clusters in sizes:
        for name, make in fleets.items():
            directory = dirs[(name, clusters)] = work / f"{name.split()[0]}-{clusters}"
            scale_fleet.write(make(clusters), directory)
            commands = {"libyaml parse only": (REPO, [sys.executable, "-c", scale_plan.PARSE_ONLY, str(directory)])}
            for label, root in roots.items():
                for mode in modes:
                    base = [sys.executable, "-m", "modelplane", "plan", "--accounting", mode]
                    commands[f"plan {mode} ({label})"] = (root, [*base, str(directory)])
                    commands[f"plan --json {mode} ({label})"] = (root, [*base, "--json", str(directory)])
            runs: dict[str, list[tuple[scale_plan.Timed, float]]] = {}
            sizes_out: dict[str, int] = {}
            for _ in range(args.repeat):
                for what, (root, argv) in commands.items():
                    out = work / "out"
                    runs.setdefault(what, []).append(_timed(root, argv, out))
                    sizes_out[what] = out.stat().st_size
            floors = runs["libyaml parse only"]
            for what, timed in runs.items():
                cpu = min(c for _, c in timed)
                ratios = [c / fc for (_, c), (_, fc) in zip(timed, floors, strict=True)]
                ratio = statistics.median(ratios)
                rss, out_bytes = max(t.peak_rss for t, _ in timed), sizes_out[what]
                goals = ""
                if what.startswith("plan") and what.endswith(f"({next(iter(roots))})") and clusters >= E2E_GOALS_FROM:
                    goal = E2E_SHORT_GOAL[1] if name.startswith("short") and clusters == E2E_SHORT_GOAL[0] else E2E_GOAL
                    checks = [(f"<= {goal}x", ratio <= goal), ("RSS", rss <= E2E_RSS_GOAL)]
                    if "--json" in what:
                        checks.append(("JSON", out_bytes <= E2E_JSON_GOAL))
                    verdicts += [ok for _, ok in checks]
                    goals = ", ".join(f"{label} {'met' if ok else 'NOT met'}" for label, ok in checks)
                print(f"{name:<16}{clusters:>9}  {what:<34}{cpu:>8.2f}{ratio:>9.2f}"
                      f"{f'{min(ratios):.2f}-{max(ratios):.2f}':>12}{min(t.seconds for t, _ in timed):>8.2f}"
                      f"{rss / 2**20:>9.0f}{out_bytes / 1e6:>8.1f}  {goals}", flush=True)
    if len(sizes) > 1:
        _place_growth(args, roots, modes, fleets, dirs, sizes)
    print(f"\nend-to-end goals: {'all met' if all(verdicts) else 'NOT all met'}")


def _place_growth(args: argparse.Namespace, roots: dict[str, Path], modes: list[str],
                  fleets: Mapping[str, object], dirs: Mapping[tuple[str, int], Path], sizes: list[int]) -> None:
    """The place phase alone (CPU, best of --repeat in one process per fleet, the trees
    alternating) per size, and its growth exponent from the smallest size to the largest:
    log(t_large / t_small) / log(C_large / C_small)."""
    print(f"\nplace phase alone, CPU s (best of {args.repeat}); exponent from {sizes[0]} to {sizes[-1]} clusters "
          f"(goal <= {E2E_EXPONENT_GOAL})")
    print(f"{'fleet':<16}{'mode':<8}{'tree':<14}" + "".join(f"{c:>9}" for c in sizes) + f"{'exponent':>10}")
    for name in fleets:
        for mode in modes:
            for label, root in roots.items():
                times = []
                for clusters in sizes:
                    out = subprocess.run([sys.executable, "-c", PLACE_ONLY, str(dirs[(name, clusters)]), mode,
                                          str(args.repeat)], cwd=root, env={**os.environ, "PYTHONPATH": str(root)},
                                         capture_output=True, text=True, check=False)
                    if out.returncode != 0:
                        raise RuntimeError(f"place worker on {root} failed: {out.stderr[-2000:]}")
                    times.append(json.loads(out.stdout.strip().splitlines()[-1])["cpu"])
                exponent = math.log(times[-1] / times[0]) / math.log(sizes[-1] / sizes[0])
                verdict = "met" if exponent <= E2E_EXPONENT_GOAL else "NOT met"
                print(f"{name:<16}{mode:<8}{label:<14}" + "".join(f"{t:>9.2f}" for t in times)
                      + f"{exponent:>10.2f}  {verdict if label == next(iter(roots)) else ''}", flush=True)


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
    ap.add_argument("--e2e-clusters", type=int, nargs="+", default=[1000],
                    help="clusters of the --e2e fleets, one or more sizes (default 1000; with two or more, the place "
                         "phase's growth exponent from the smallest to the largest is printed too)")
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
