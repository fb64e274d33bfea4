"""Scheduler benchmark: placement time and peak memory over generated fleets.

    .venv/bin/python benchmarks/scheduler.py                 # the default grid
    .venv/bin/python benchmarks/scheduler.py --clusters 1000 --replicas 10000
    .venv/bin/python benchmarks/scheduler.py --capacity 0.5  # half the demand: shortfalls

A fleet of C clusters, each with P pools (1-GPU and 8-GPU classes, two regions), and
D = ceil(R / 100) deployments sharing R replicas (a mix of 1-GPU, 4-GPU and
Leader+Worker gang engines, some pinned to a region). Pool sizes are chosen so the
fleet holds `capacity` x the demand. Only `place_fleet` is timed (loading the
manifests is not); peak memory is measured with tracemalloc in a separate run.
"""

from __future__ import annotations

import argparse
import gc
import math
import os
import sys
import time
import tracemalloc

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from modelplane.api import load_documents  # noqa: E402
from modelplane.scheduler import place_fleet  # noqa: E402
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


def measure(clusters: int, pools: int, replicas: int, capacity: float, accounting: str,
            repeat: int) -> dict:
    fleet = load_documents(generate(clusters, pools, replicas, capacity))
    best = math.inf
    result = None
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
    placed = sum(len(d.replicas) for d in result.deployments)
    return {"clusters": clusters, "pools": pools, "replicas": replicas,
            "deployments": len(result.deployments), "placed": placed,
            "seconds": best, "peak_mib": peak / 2**20}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--clusters", type=int, nargs="*", help="cluster counts (default: grid)")
    ap.add_argument("--replicas", type=int, nargs="*", help="replica counts (default: grid)")
    ap.add_argument("--pools", type=int, default=2, help="pools per cluster (default 2)")
    ap.add_argument("--capacity", type=float, default=1.25,
                    help="fleet capacity as a multiple of demand (default 1.25)")
    ap.add_argument("--accounting", choices=["Device", "Node", "both"], default="both")
    ap.add_argument("--repeat", type=int, default=3, help="timed runs per point; best is kept")
    args = ap.parse_args(argv)
    if args.clusters or args.replicas:
        grid = [(c, r) for c in (args.clusters or [100]) for r in (args.replicas or [1000])]
    else:
        grid = GRID
    modes = ["Device", "Node"] if args.accounting == "both" else [args.accounting]
    print(f"pools/cluster={args.pools} capacity={args.capacity}x demand; best of {args.repeat}")
    print(f"{'mode':<7}{'clusters':>9}{'replicas':>9}{'deps':>6}{'placed':>8}"
          f"{'seconds':>10}{'peak MiB':>10}{'time x':>9}{'R*C x':>9}")
    for mode in modes:
        base = None
        for clusters, replicas in grid:
            m = measure(clusters, args.pools, replicas, args.capacity, mode, args.repeat)
            if base is None:
                base = m
            tx = m["seconds"] / base["seconds"] if base["seconds"] else float("nan")
            rc = (m["replicas"] * m["clusters"]) / (base["replicas"] * base["clusters"])
            print(f"{mode:<7}{clusters:>9}{replicas:>9}{m['deployments']:>6}{m['placed']:>8}"
                  f"{m['seconds']:>10.3f}{m['peak_mib']:>10.1f}{tx:>9.1f}{rc:>9.0f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
