"""Simulated-cluster benchmark: time and peak memory to start N simulated clusters.

    .venv/bin/python benchmarks/sim.py                  # N = 1, 3, 10; 8 GPU nodes per cluster
    .venv/bin/python benchmarks/sim.py --clusters 3 --nodes 16

Each cluster is EKS-shaped: one pool of `--nodes` p5.48xlarge nodes with 8 H100s each (so a
cluster publishes 8 x nodes DRA devices), started with `sim.SimFleet.up` (etcd, kube-apiserver,
kube-controller-manager, kube-scheduler, kwok and the LeaderWorkerSet controller when built).
Timed: `up` until every node is Ready (wall clock), then `down`. Peak memory: the largest
sum of the resident set sizes of all sim processes, sampled every 0.2 s from the start of `up`
until 5 s after it returned (the processes settle after start-up). Not a test: no pass/fail.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from modelplane.api import load_documents  # noqa: E402
from sim import SimFleet, find_tools  # noqa: E402
from sim.process import start_time  # noqa: E402

GRID = (1, 3, 10)


def fleet_documents(clusters: int, nodes: int) -> list[dict]:
    docs: list[dict] = [{
        "apiVersion": "modelplane.ai/v1alpha1", "kind": "InferenceClass", "metadata": {"name": "h100"},
        "spec": {"provisioning": {"provider": "EKS", "eks": {"instanceType": "p5.48xlarge",
                                                            "accelerator": {"type": "nvidia-h100-80gb", "count": 8}}},
                 "devices": [{"name": "gpu", "driver": "gpu.nvidia.com", "deviceClassName": "gpu.nvidia.com",
                              "count": 8, "attributes": {"productName": {"string": "NVIDIA H100 80GB HBM3"}},
                              "capacity": {"memory": {"value": "81559Mi"}}}]}}]
    for i in range(clusters):
        docs.append({"apiVersion": "modelplane.ai/v1alpha1", "kind": "InferenceCluster",
                     "metadata": {"name": f"bench-{i}"},
                     "spec": {"cluster": {"source": "EKS", "eks": {"region": "us-east-1"}},
                              "nodePools": [{"name": "h100", "className": "h100", "nodeCount": nodes}]}})
    return docs


def rss_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


class RssSampler(threading.Thread):
    """Samples the summed RSS of the processes recorded in a sim state file."""

    def __init__(self, state_file: Path) -> None:
        super().__init__(daemon=True)
        self.state_file = state_file
        self.peak_kib = 0
        self.stopped = threading.Event()

    def pids(self) -> list[int]:
        try:
            state = json.loads(self.state_file.read_text())
        except (OSError, ValueError):
            return []
        return [int(p["pid"]) for c in state.get("clusters", {}).values() for p in c.get("processes", [])
                if start_time(int(p["pid"])) == p["start"]]

    def run(self) -> None:
        while not self.stopped.is_set():
            self.peak_kib = max(self.peak_kib, sum(rss_kib(pid) for pid in self.pids()))
            time.sleep(0.2)


def measure(clusters: int, nodes: int, timeout: float) -> tuple[float, float, int, float]:
    """(up seconds, down seconds, processes, peak RSS MiB) for one fleet."""
    fleet = load_documents(fleet_documents(clusters, nodes))
    with tempfile.TemporaryDirectory(prefix="modelplane-sim-bench-") as tmp:
        sim = SimFleet(Path(tmp) / "state", timeout=timeout, tools=find_tools())
        sampler = RssSampler(sim.state_file)
        sampler.start()
        t0 = time.monotonic()
        try:
            sim.up(fleet)
            up_s = time.monotonic() - t0
            processes = len(sampler.pids())
            time.sleep(5.0)
        finally:
            sampler.stopped.set()
            sampler.join()
            t1 = time.monotonic()
            if sim.state_file.exists():
                sim.down()
            down_s = time.monotonic() - t1
    return up_s, down_s, processes, sampler.peak_kib / 1024


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clusters", type=int, action="append", help="cluster counts (default 1, 3, 10)")
    parser.add_argument("--nodes", type=int, default=8, help="GPU nodes per cluster (default 8)")
    parser.add_argument("--timeout", type=float, default=600.0, help="per start-up phase (default 600 s)")
    args = parser.parse_args()
    print(f"{'clusters':>8} {'nodes':>6} {'GPUs':>6} {'procs':>6} {'up s':>8} {'s/cluster':>9} "
          f"{'down s':>7} {'peak RSS MiB':>13} {'MiB/cluster':>11}")
    for n in args.clusters or GRID:
        up_s, down_s, procs, peak = measure(n, args.nodes, args.timeout)
        print(f"{n:>8} {n * args.nodes:>6} {n * args.nodes * 8:>6} {procs:>6} {up_s:>8.1f} {up_s / n:>9.1f} "
              f"{down_s:>7.1f} {peak:>13.0f} {peak / n:>11.0f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
