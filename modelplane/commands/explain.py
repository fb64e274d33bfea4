"""`modelplane explain MANIFEST_DIR DEPLOYMENT`: why one ModelDeployment's replicas are where they
are, per cluster and per pool (modelplane.explain): the selector clause that refuses a device and
the value the class declares, the taints, zones, budget, and what would make it fit."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping

from modelplane.api import Fleet
from modelplane.commands.inputs import read_observed, read_previous
from modelplane.commands.output import JSON, YAML, add_manifests, add_output, dump, load_fleet
from modelplane.commands.parsers import Subparsers
from modelplane.scheduler import ACCOUNTING_MODES, DEFAULT_ACCOUNTING, FleetPlacement, place_fleet


def add_parser(subparsers: Subparsers) -> None:
    p = subparsers.add_parser(
        "explain", help="why one deployment's replicas are placed where they are, per cluster and pool",
        description="Place the fleet as `plan` does and explain one ModelDeployment: per cluster, the "
                    "scheduler's verdict, its clusterSelector, taints and ModelCache; per pool, each device "
                    "request against the class (the selector clause that is false and what the class says), "
                    "capacity and zones; the FleetBudgets; and for each failing fact what would make it hold.")
    add_manifests(p)
    p.add_argument("deployment", metavar="DEPLOYMENT", help="NAMESPACE/NAME, or NAME when one namespace has it")
    p.add_argument("--previous", metavar="FILE", help="previous placement (`plan -o json`), as for plan")
    p.add_argument("--observed", metavar="FILE", help='observed pool sizes {"cluster": {"pool": nodes}}, as for plan')
    p.add_argument("--accounting", choices=ACCOUNTING_MODES, default=DEFAULT_ACCOUNTING,
                   help=f"capacity unit (default: {DEFAULT_ACCOUNTING})")
    add_output(p, (JSON, YAML), what="the explanation")
    p.set_defaults(func=run)


def explained(fleet: Fleet, key: tuple[str, str], *, previous: FleetPlacement | None,
              observed: Mapping[str, Mapping[str, int]] | None, accounting: str, output: str | None) -> str:
    """The explanation of one deployment (`explain`, `plan --explain`): the fleet placed with
    every cluster's reason kept for it (place_fleet(explain=)), then modelplane.explain."""
    # Deferred: the explanation evaluates selectors (modelplane.cel), which other commands' start-up skips.
    from modelplane.explain import explain_deployment, format_explanation

    placement = place_fleet(fleet, previous=previous, accounting=accounting, observed=observed, explain={key})
    explanation = explain_deployment(fleet, placement, key, observed)
    return dump(explanation.to_json(), output) if output in (JSON, YAML) else format_explanation(explanation)


def run(args: argparse.Namespace) -> int:
    from modelplane.explain import find_deployment

    try:
        fleet = load_fleet(args.manifests)
        key = find_deployment(fleet, args.deployment)
        previous = read_previous(args.previous) if args.previous else None
        observed = read_observed(args.observed, fleet=fleet) if args.observed else None
    except (ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    sys.stdout.write(explained(fleet, key, previous=previous, observed=observed, accounting=args.accounting,
                               output=args.output))
    return 0
