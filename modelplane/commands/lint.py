"""`python -m modelplane lint MANIFEST_DIR`: the policy-pack checks without Pulumi, so any CI
can gate manifests. Exit 1 when a mandatory check fails, 0 otherwise, 2 on invalid input."""

from __future__ import annotations

import argparse
import sys

from modelplane.api import ManifestError, load_manifests
from modelplane.commands.inputs import read_json, read_observed
from modelplane.commands.parsers import Subparsers
from modelplane.scheduler import ACCOUNTING_MODES, DEFAULT_ACCOUNTING


def add_parser(subparsers: Subparsers) -> None:
    p = subparsers.add_parser(
        "lint", help="run the policy checks over manifests (exit 1 on a mandatory finding)",
        description="Place the fleet and run every check of the CrossGuard pack "
                    "(policy-packs/modelplane) over it. Every finding is printed with its level; "
                    "the exit code is 1 when any mandatory check fails.")
    p.add_argument("manifests", metavar="MANIFEST_DIR", help="manifest file or directory")
    p.add_argument("--observed", metavar="FILE",
                   help="observed node counts, JSON {cluster: {pool: nodes}}; placement uses them "
                        "and declared-capacity compares them with the declarations")
    p.add_argument("--config", metavar="FILE",
                   help="policy config, the same JSON as `pulumi preview --policy-pack-config` "
                        "({\"policy\": \"advisory\"} or {\"policy\": {\"enforcementLevel\": ...}})")
    p.add_argument("--accounting", choices=ACCOUNTING_MODES, default=DEFAULT_ACCOUNTING,
                   help=f"capacity unit for placement (default: {DEFAULT_ACCOUNTING})")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # Deferred: `python -m modelplane` imports every command to build its parser, and the
    # checks import modelplane.cel (~0.16 s) that the other commands need not pay for.
    from modelplane.checks import CHECKS, MANDATORY, levels_from_config, place, run_checks

    try:
        fleet = load_manifests(args.manifests)
        observed = read_observed(args.observed, "observed counts", fleet) if args.observed else None
        config = read_json(args.config, "policy config") if args.config else {}
        if not isinstance(config, dict):
            raise ValueError("policy config must be a JSON object keyed by policy name")
        levels = levels_from_config(config)
        options = {k: {o: v for o, v in val.items() if o != "enforcementLevel"}
                   for k, val in config.items() if isinstance(val, dict)}
        placement = place(fleet, observed, args.accounting)
    except (ManifestError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    findings = run_checks(fleet, placement, observed, levels=levels, options=options)
    for finding in findings:
        print(finding)
    mandatory = sum(f.level == MANDATORY for f in findings)
    advisory = len(findings) - mandatory
    enabled = sum((levels.get(n, c.level) != "disabled") for n, c in CHECKS.items())
    print(f"{enabled} checks: {mandatory} mandatory, {advisory} advisory finding(s)")
    return 1 if mandatory else 0
