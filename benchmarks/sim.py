"""Simulated-cluster benchmark: time and peak memory to start N simulated clusters, and
`pulumi up` of examples/canary on its simulated clusters (the sim stack).

    .venv/bin/python benchmarks/sim.py                  # N = 1, 3, 10; 8 GPU nodes per cluster; canary
    .venv/bin/python benchmarks/sim.py --clusters 3 --nodes 16 --no-canary
    .venv/bin/python benchmarks/sim.py --only-canary

Each cluster is EKS-shaped: one pool of `--nodes` p5.48xlarge nodes with 8 H100s each (so a
cluster publishes 8 x nodes DRA devices) and the system node of its system node group, started
with `sim.SimFleet.up` (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok and
the LeaderWorkerSet controller when built).
Timed: `up` until every node is Ready (wall clock), then `down`. Peak memory: the largest
sum of the resident set sizes of all sim processes, sampled every 0.2 s from the start of `up`
until 5 s after it returned (the processes settle after start-up).

Canary: `sim up examples/canary` (2 regions + the control cluster), then, on one throwaway stack
each, through the Automation API with the engine of scripts/engine-env: the baseline, `pulumi up`
of the same fleet on the render stack (the same program and objects, written as YAML), then
`pulumi up` on the sim stack (applied to the API servers, every workload awaited), a second
`up` with nothing to change, and `destroy`. Peak memory: the summed RSS of this process's
descendants (the pulumi CLI, language host, program, dynamic and Kubernetes providers), sampled
every 0.2 s during each `up`; the sim's own processes are reported separately. Ratios are against
the render stack's `up` of the same run. Not a test: no pass/fail.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

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
    # The control-plane gateway on the first cluster, so `up` adds no control cluster of its own.
    docs.append({"apiVersion": "modelplane.ai/v1alpha1", "kind": "InferenceGateway", "metadata": {"name": "default"},
                 "spec": {"backend": "Traefik", "traefik": {"version": "41.3.0"}, "clusterName": "bench-0"}})
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


def descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                ppid = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(proc.name))
    out, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


class TreeSampler(threading.Thread):
    """Peak summed RSS of this process's descendants (the Pulumi engine and its plugins), leaving
    out the sim's processes (also our children: `up` started them)."""

    def __init__(self, sim: RssSampler) -> None:
        super().__init__(daemon=True)
        self.sim = sim
        self.peak_kib = 0
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.is_set():
            ours = set(descendants(os.getpid())) - set(self.sim.pids())
            self.peak_kib = max(self.peak_kib, sum(rss_kib(pid) for pid in ours))
            time.sleep(0.2)


def timed(action: Callable[[], object], sim: RssSampler) -> tuple[float, float]:
    """(seconds, peak RSS MiB of the engine's process tree) of one Automation API call."""
    sampler = TreeSampler(sim)
    sampler.start()
    t0 = time.monotonic()
    try:
        action()
    finally:
        sampler.stopped.set()
        sampler.join()
    return time.monotonic() - t0, sampler.peak_kib / 1024


def canary(timeout: float) -> int:
    """`pulumi up` of examples/canary on the render stack (baseline) and on the sim stack."""
    from pulumi import automation as auto

    from modelplane.api import load_manifests
    from tests.engine.conftest import _engine_environment as engine_environment
    from tests.sim.stack import make_sim_stack, remove_sim_stack

    env, why = engine_environment()
    if env is None:
        print(f"canary: the Pulumi engine is not built ({why}); run scripts/bootstrap-tools", file=sys.stderr)
        return 1
    manifests = REPO / "examples" / "canary"
    key = auto.ConfigValue(json.dumps({"ml-team/together-api-key": "sk-benchmark-not-a-key"}), secret=True)
    with tempfile.TemporaryDirectory(prefix="modelplane-sim-bench-") as tmp:
        work = Path(tmp)
        (work / "state").mkdir()
        (work / "home").mkdir()
        env = {**env, "PULUMI_BACKEND_URL": f"file://{work / 'state'}", "PULUMI_HOME": str(work / "home"),
               "PULUMI_CONFIG_PASSPHRASE": env.get("PULUMI_CONFIG_PASSPHRASE") or "benchmark"}
        sim = SimFleet(work / "sim", timeout=timeout, tools=find_tools())
        sampler = RssSampler(sim.state_file)
        sampler.start()
        t0 = time.monotonic()
        stacks = []
        try:
            kubeconfigs = sim.up(load_manifests(manifests), source=str(manifests))
            sim_up_s = time.monotonic() - t0
            render = make_sim_stack(env, manifests, sim.state_dir, {
                "modelplane:sim": None, "modelplane:renderDir": str(work / "render")})
            stacks.append(render)
            stack = make_sim_stack(env, manifests, sim.state_dir)
            stacks.append(stack)
            stack.stack.set_config("modelplane:endpointApiKeys", key)
            base_s, base_mib = timed(lambda: render.up(), sampler)
            up_s, up_mib = timed(lambda: stack.up(), sampler)
            again_s, again_mib = timed(lambda: stack.up(), sampler)
            objects = len(stack.kubernetes_objects())
            destroy_s, _ = timed(lambda: stack.destroy(), sampler)
        finally:
            for made in stacks:
                remove_sim_stack(made)
            sampler.stopped.set()
            sampler.join()
            if sim.state_file.exists():
                sim.down()
    print(f"\nexamples/canary: {len(kubeconfigs)} simulated clusters ({', '.join(sorted(kubeconfigs))}) up in "
          f"{sim_up_s:.1f} s, sim processes peak {sampler.peak_kib / 1024:.0f} MiB; {objects} Kubernetes objects")
    print(f"{'pulumi up':<34} {'s':>7} {'x render':>9} {'peak RSS MiB':>13} {'x render':>9}")
    for label, secs, mib in (("render stack (baseline, YAML)", base_s, base_mib),
                             ("sim stack, first up (applied)", up_s, up_mib),
                             ("sim stack, again (no changes)", again_s, again_mib)):
        print(f"{label:<34} {secs:>7.1f} {secs / base_s:>9.2f} {mib:>13.0f} {mib / base_mib:>9.2f}")
    print(f"{'sim stack, destroy':<34} {destroy_s:>7.1f} {destroy_s / base_s:>9.2f}")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clusters", type=int, action="append", help="cluster counts (default 1, 3, 10)")
    parser.add_argument("--nodes", type=int, default=8, help="GPU nodes per cluster (default 8)")
    parser.add_argument("--timeout", type=float, default=600.0, help="per start-up phase (default 600 s)")
    parser.add_argument("--no-canary", dest="canary", action="store_false",
                        help="skip `pulumi up` of examples/canary on the sim stack")
    parser.add_argument("--only-canary", action="store_true", help="only `pulumi up` of examples/canary")
    args = parser.parse_args()
    if args.only_canary:
        return canary(args.timeout)
    print(f"{'clusters':>8} {'nodes':>6} {'GPUs':>6} {'procs':>6} {'up s':>8} {'s/cluster':>9} "
          f"{'down s':>7} {'peak RSS MiB':>13} {'MiB/cluster':>11}")
    for n in args.clusters or GRID:
        up_s, down_s, procs, peak = measure(n, args.nodes, args.timeout)
        print(f"{n:>8} {n * args.nodes:>6} {n * args.nodes * 8:>6} {procs:>6} {up_s:>8.1f} {up_s / n:>9.1f} "
              f"{down_s:>7.1f} {peak:>13.0f} {peak / n:>11.0f}", flush=True)
    return canary(args.timeout) if args.canary else 0


if __name__ == "__main__":
    sys.exit(main())
