"""`modelplane lint MANIFEST_DIR`: the policy-pack checks without Pulumi, so any CI can gate
manifests. Exit 1 when a mandatory check fails, 0 otherwise, 2 on invalid input.

Findings are grouped by manifest file, then by level (mandatory first): one line each (policy,
object, field) with what is wrong and the fix indented under it; colour on a terminal only
(NO_COLOR honoured). `-o wide` prints each finding on one line (for grep); `-o json|yaml` a
document."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from modelplane.api import ManifestError
from modelplane.commands.inputs import read_json, read_observed
from modelplane.commands.output import JSON, WIDE, YAML, add_manifests, add_output, dump, load_fleet, use_colour
from modelplane.commands.parsers import Subparsers
from modelplane.json_types import JsonObject
from modelplane.scheduler import ACCOUNTING_MODES, DEFAULT_ACCOUNTING
from modelplane.words import counted

# Findings that name no manifest (observed capacity, the program's resources) are grouped here.
NO_FILE = "(not from a manifest file)"
LEVEL_ORDER = ("mandatory", "advisory")
COLOURS = {"mandatory": "\033[1;31m", "advisory": "\033[33m", "file": "\033[1m"}
RESET = "\033[0m"


def add_parser(subparsers: Subparsers) -> None:
    p = subparsers.add_parser(
        "lint", help="run the policy checks over manifests (exit 1 on a mandatory finding)",
        description="Place the fleet and run every check of the CrossGuard pack "
                    "(policy-packs/modelplane) over it. Findings are grouped by file and level; "
                    "the exit code is 1 when any mandatory check fails.")
    add_manifests(p)
    p.add_argument("--observed", metavar="FILE",
                   help="observed node counts, JSON {cluster: {pool: nodes}}; placement uses them "
                        "and declared-capacity compares them with the declarations")
    p.add_argument("--config", metavar="FILE",
                   help="policy config, the same JSON as `pulumi preview --policy-pack-config` "
                        "({\"policy\": \"advisory\"} or {\"policy\": {\"enforcementLevel\": ...}})")
    p.add_argument("--accounting", choices=ACCOUNTING_MODES, default=DEFAULT_ACCOUNTING,
                   help=f"capacity unit for placement (default: {DEFAULT_ACCOUNTING})")
    add_output(p, json_flag=False, what="the findings (wide: one line each)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # Deferred: `modelplane` imports every command to build its parser, and the checks import
    # modelplane.cel (~0.16 s) that the other commands need not pay for.
    from modelplane.checks import CHECKS, MANDATORY, levels_from_config, place, run_checks

    try:
        fleet = load_fleet(args.manifests)
        observed = read_observed(args.observed, "observed counts", fleet) if args.observed else None
        config = read_json(args.config, "policy config") if args.config else {}
        if not isinstance(config, dict):
            raise ValueError("policy config must be a JSON object keyed by policy name")
        levels = levels_from_config(config)
        options = {k: {o: v for o, v in val.items() if o != "enforcementLevel"}
                   for k, val in config.items() if isinstance(val, dict)}
        placement = place(fleet, observed, args.accounting)
    except ManifestError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except (ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    findings = run_checks(fleet, placement, observed, levels=levels, options=options)
    mandatory = sum(f.level == MANDATORY for f in findings)
    advisory = len(findings) - mandatory
    enabled = sum((levels.get(n, c.level) != "disabled") for n, c in CHECKS.items())
    summary = f"{counted(enabled, 'check')}: {mandatory} mandatory, {counted(advisory, 'advisory finding')}"
    if args.output in (JSON, YAML):
        doc: JsonObject = {"findings": [_finding_json(f) for f in findings],
                           "summary": {"checks": enabled, "mandatory": mandatory, "advisory": advisory}}
        sys.stdout.write(dump(doc, args.output))
    elif args.output == WIDE:
        sys.stdout.write("".join(f"{f}\n" for f in findings) + summary + "\n")
    else:
        sys.stdout.write(format_findings(findings, colour=use_colour(sys.stdout)) + summary + "\n")
    return 1 if mandatory else 0


def _finding_json(f: object) -> JsonObject:
    from modelplane.checks import Finding
    from modelplane.checks.context import split_ref

    assert isinstance(f, Finding)
    obj, file, index = split_ref(f.resource)
    return {"policy": f.policy, "level": f.level, "object": obj, "file": file or None,
            "document": int(index) if index else None, "field": f.field, "message": f.message}


def format_findings(findings: Sequence[object], *, colour: bool = False) -> str:
    """Findings by file, then level: `policy  Object #doc  field` and the message indented."""
    from modelplane.checks import Finding
    from modelplane.checks.context import split_ref

    def paint(text: str, key: str) -> str:
        return f"{COLOURS[key]}{text}{RESET}" if colour else text

    groups: dict[str, dict[str, list[tuple[str, str, Finding]]]] = {}
    for f in findings:
        assert isinstance(f, Finding)
        obj, file, index = split_ref(f.resource)
        groups.setdefault(file or NO_FILE, {}).setdefault(f.level, []).append((obj, index, f))
    out: list[str] = []
    for file in sorted(groups, key=lambda name: (name == NO_FILE, name)):
        out.append(paint(file, "file"))
        by_level = groups[file]
        for level in sorted(by_level, key=lambda lv: LEVEL_ORDER.index(lv) if lv in LEVEL_ORDER else 9):
            items = by_level[level]
            out.append("  " + paint(f"{level} ({len(items)})", level if level in COLOURS else "file"))
            for obj, index, f in sorted(items, key=lambda item: (int(item[1] or 0), item[2].policy)):
                where = " ".join(part for part in (obj, f"#{index}" if index else "", f.field) if part)
                out.append(f"    {f.policy}  {where}")
                out.append(f"        {f.message}")
    return "\n".join(out) + ("\n" if out else "")
