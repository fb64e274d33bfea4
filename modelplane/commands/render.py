"""`python -m modelplane render MANIFEST_DIR OUT_DIR`: every manifest per workload cluster."""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from typing import Any


def add_parser(subparsers: Any) -> None:
    from modelplane.scheduler import ACCOUNTING_MODES

    p = subparsers.add_parser(
        "render", help="place the fleet and write every workload-cluster manifest as YAML",
        description="Run the fleet scheduler over a manifest file or directory, render every "
                    "Kubernetes object the program would apply on each workload cluster and "
                    "write them to OUT_DIR/<cluster>/<kind>-<name>.yaml, one object per file.")
    p.add_argument("manifests", metavar="MANIFEST_DIR", help="manifest file or directory")
    p.add_argument("out_dir", metavar="OUT_DIR", help="directory to write into")
    p.add_argument("--previous", metavar="FILE",
                   help="previous placement (`plan --json` output); its replicas are kept "
                        "where they still fit")
    p.add_argument("--accounting", choices=ACCOUNTING_MODES, default="Device",
                   help="capacity unit for placement (default: Device)")
    p.set_defaults(func=run)


def summary(placement: Any, manifests: dict[str, list[dict]]) -> str:
    lines = []
    for d in placement.deployments:
        lines.append(f"{d.namespace}/{d.name}: {len(d.replicas)} of {d.desired} replicas placed")
    for cluster, objects in manifests.items():
        kinds = Counter(o["kind"] for o in objects)
        detail = ", ".join(f"{k} {n}" for k, n in sorted(kinds.items())) or "nothing"
        lines.append(f"{cluster}: {len(objects)} objects ({detail})")
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> int:
    from modelplane.api import ManifestError, load_manifests
    from modelplane.render import RenderError, render_cluster_manifests
    from modelplane.render.output import write_cluster_dirs
    from modelplane.commands.inputs import read_previous
    from modelplane.scheduler import PlacementFormatError, place_fleet

    try:
        fleet = load_manifests(args.manifests)
        previous = read_previous(args.previous) if args.previous else None
        placement = place_fleet(fleet, previous=previous, accounting=args.accounting)
        manifests = render_cluster_manifests(fleet, placement)
    except ManifestError as exc:
        print(f"error: invalid manifests:\n{exc}", file=sys.stderr)
        return 2
    except (RenderError, PlacementFormatError, ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        written = write_cluster_dirs(args.out_dir, manifests)
    except OSError as exc:
        print(f"error: cannot write {args.out_dir}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    sys.stdout.write(summary(placement, manifests))
    sys.stdout.write(f"wrote {written} files under {args.out_dir}\n")
    return 0
