"""`python -m modelplane plan MANIFEST_DIR`: where every replica would run, and why not."""

from __future__ import annotations

import argparse
import json
import os
import sys

from modelplane.api import ManifestError, load_manifests
from modelplane.commands.inputs import read_observed, read_previous
from modelplane.commands.parsers import Subparsers
from modelplane.scheduler import ACCOUNTING_MODES, DEFAULT_ACCOUNTING, place_fleet
from modelplane.scheduler.report import format_table


def add_parser(subparsers: Subparsers) -> None:
    p = subparsers.add_parser(
        "plan", help="place every ModelDeployment's replicas on the fleet (dry run)",
        description="Run the fleet scheduler over a manifest file or directory and print "
                    "the placement: replicas, engine pools, conditions and, for every "
                    "replica that could not be placed, why each cluster refused it.")
    p.add_argument("manifests", metavar="MANIFEST_DIR", help="manifest file or directory")
    p.add_argument("--previous", metavar="FILE",
                   help="previous placement (the --json output); its replicas are kept "
                        "where they still fit")
    p.add_argument("--accounting", choices=ACCOUNTING_MODES, default=DEFAULT_ACCOUNTING,
                   help="capacity unit: Device (default, packs sub-node engines) or Node "
                        "(the reference: a claiming pod takes a whole node)")
    p.add_argument("--observed", metavar="FILE",
                   help='observed pool sizes as JSON {"cluster": {"pool": nodes}}; '
                        "overrides declared node counts")
    p.add_argument("--json", action="store_true",
                   help="print the placement as compact JSON (the --previous schema; pipe it through "
                        "`python -m json.tool` to read it)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        fleet = load_manifests(args.manifests)
        previous = read_previous(args.previous) if args.previous else None
        observed = read_observed(args.observed) if args.observed else None
    except ManifestError as exc:
        print(f"error: invalid manifests:\n{exc}", file=sys.stderr)
        return 2
    except (ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    placement = place_fleet(fleet, previous=previous, accounting=args.accounting,
                            observed=observed)
    # Compact: the C encoder; `indent` switches json to its pure-Python encoder (5x slower).
    text = (json.dumps(placement.to_json(), separators=(",", ":")) + "\n" if args.json
            else format_table(placement, args.accounting))
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        # `plan ... | head` closed the pipe early: not an error of the plan.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0
