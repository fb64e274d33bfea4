"""`python -m modelplane sim up|down|status MANIFEST_DIR`: one simulated cluster per
InferenceCluster (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok and the
LeaderWorkerSet controller on 127.0.0.1), with kwok GPU nodes and DRA ResourceSlices shaped like
the real ones (docs/sim.md). Exit 0 on success, 1 when the sim fails, 2 on invalid input."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from modelplane.api import ManifestError, load_manifests
from modelplane.commands.parsers import Subparsers
from modelplane.durations import MAX_START_TIMEOUT_S, duration_arg
from modelplane.redact import outside_text

# The supervisor lives outside the pure core (it starts processes); this command is its CLI.
from sim import DEFAULT_STATE_DIR, SimError, SimFleet


def add_parser(subparsers: Subparsers) -> None:
    p = subparsers.add_parser(
        "sim", help="start, stop or show simulated clusters of a fleet (real control planes + kwok)",
        description="Simulated clusters for a fleet: one real Kubernetes control plane per InferenceCluster, "
                    "with kwok nodes carrying the labels of the cluster's source and GPUs published as DRA "
                    "ResourceSlices. `up` returns once every cluster is ready and prints each kubeconfig.")
    p.add_argument("action", choices=("up", "down", "status"))
    p.add_argument("manifests", metavar="MANIFEST_DIR", nargs="?",
                   help="manifest file or directory (needed by `up`)")
    p.add_argument("--state-dir", default=DEFAULT_STATE_DIR, metavar="DIR",
                   help=f"where the clusters keep their data, kubeconfigs and logs (default: {DEFAULT_STATE_DIR})")
    p.add_argument("--timeout", type=duration_arg("--timeout", MAX_START_TIMEOUT_S), default=120.0, metavar="SECONDS",
                   help=f"how long each start-up phase may take before `up` gives up, at most {MAX_START_TIMEOUT_S:g} "
                        "(default: 120)")
    p.add_argument("--first-port", type=int, metavar="PORT",
                   help="use consecutive ports from PORT (7 per cluster) instead of free ones the kernel picks")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    fleet_sim = SimFleet(args.state_dir, timeout=args.timeout, first_port=args.first_port)
    try:
        if args.action == "up":
            if not args.manifests:
                print("error: `sim up` needs MANIFEST_DIR (e.g. examples/kind)", file=sys.stderr)
                return 2
            if args.first_port is not None and not 1024 <= args.first_port <= 65535:
                print("error: --first-port must be within 1024..65535", file=sys.stderr)
                return 2
            try:
                fleet = load_manifests(args.manifests)
            except (ManifestError, ValueError) as exc:
                print(f"error: {exc}", file=sys.stderr)
                return 2
            kubeconfigs = fleet_sim.up(fleet, source=str(args.manifests))
            print(f"{len(kubeconfigs)} simulated cluster(s) running; state in {fleet_sim.state_dir}")
            for name, path in kubeconfigs.items():
                print(f"  {name}: kubectl --kubeconfig {_shown(path)} get nodes")
            print(f"stop them with: python -m modelplane sim down --state-dir {args.state_dir}")
            return 0
        if args.action == "down":
            stopped = fleet_sim.down()
            print(f"stopped {len(stopped)} simulated cluster(s)" + (f": {', '.join(stopped)}" if stopped else ""))
            return 0
        rows = fleet_sim.status()
        if not rows:
            print(f"no simulated clusters recorded in {fleet_sim.state_dir}")
            return 0
        for row in rows:
            state = "running" if row.running else "NOT running (" + ", ".join(
                n for n, ok in row.processes.items() if not ok) + " down)"
            # sim.json is read back from disk: its text is printed as outside text.
            print(outside_text(f"{row.name}: {state}; {row.server}; kubeconfig {_shown(row.kubeconfig)}", limit=1000))
        return 0 if all(r.running for r in rows) else 1
    except SimError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


def _shown(path: Path) -> str:
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)
