"""`python -m modelplane verify MANIFEST_DIR --placement FILE --observe KUBECONFIG_DIR`: does
every replica the fleet placed really run where the plan put it? (docs/observe.md)

Exit 0 when every placed replica has its pods Running and Ready on the planned pool with
their claims allocated as charged; 1 when any does not (each with the cluster's reason) or
its cluster cannot be read; 2 on bad input."""

from __future__ import annotations

import argparse
import sys
import time

from modelplane.api import ManifestError
from modelplane.commands.inputs import read_json
from modelplane.commands.output import JSON, WIDE, YAML, add_manifests, add_output, dump, load_fleet
from modelplane.commands.parsers import Subparsers
from modelplane.durations import MAX_READ_TIMEOUT_S, MAX_WAIT_S, duration_arg
from modelplane.observe import DEFAULT_READ_TIMEOUT_S
from modelplane.observe.observation_report import format_verification
from modelplane.observe.read import kubeconfigs_in, read_clusters
from modelplane.observe.verify import Verification, verify
from modelplane.scheduler import FleetPlacement, PlacementFormatError

POLL_S = 2.0


def add_parser(subparsers: Subparsers) -> None:
    p = subparsers.add_parser(
        "verify", help="check that every placed replica runs where the plan put it",
        description="Read the clusters and report, per placed replica: pods Running and Ready on the "
                    "planned pool, claims allocated with the planned device count, or why not (the "
                    "scheduler's own message). Exit 1 on any mismatch.")
    add_manifests(p)
    p.add_argument("--placement", metavar="FILE", required=True,
                   help="the placement to verify: `plan --json` output or `pulumi stack output placement --json`")
    p.add_argument("--observe", metavar="KUBECONFIG_DIR", required=True,
                   help="one kubeconfig per cluster (<cluster>/kubeconfig, <cluster>.yaml, ...; a sim state dir)")
    p.add_argument("--timeout", metavar="SECONDS", default=DEFAULT_READ_TIMEOUT_S,
                   type=duration_arg("--timeout", MAX_READ_TIMEOUT_S),
                   help=f"time each cluster gets to answer one read, at most {MAX_READ_TIMEOUT_S:g} "
                        f"(default {DEFAULT_READ_TIMEOUT_S:g})")
    p.add_argument("--wait", metavar="SECONDS", default=0.0, type=duration_arg("--wait", MAX_WAIT_S, allow_zero=True),
                   help="keep reading until every replica verifies or this many seconds passed, at most "
                        f"{MAX_WAIT_S:g} (default 0: once)")
    add_output(p, what="the report (wide: with each replica's index)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        fleet = load_fleet(args.manifests)
        placement = FleetPlacement.from_json(read_json(args.placement, "placement"))
        kubeconfigs = kubeconfigs_in(args.observe, fleet.clusters)
    except ManifestError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except PlacementFormatError as exc:
        print(f"error: placement {args.placement} is not a placement (the `plan --json` output): {exc}",
              file=sys.stderr)
        return 2
    except (ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    deadline = time.monotonic() + args.wait
    while True:
        report: Verification = verify(fleet, placement, read_clusters(kubeconfigs, args.timeout))
        if report.ok or time.monotonic() + POLL_S > deadline:
            break
        time.sleep(POLL_S)
    sys.stdout.write(dump(report.to_json(), args.output) if args.output in (JSON, YAML)
                     else format_verification(report, wide=args.output == WIDE))
    return 0 if report.ok else 1
