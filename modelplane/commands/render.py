"""`python -m modelplane render MANIFEST_DIR OUT_DIR`: every manifest per cluster, as the
GitOps path of the Pulumi program (the `render` stack) writes them."""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path

from modelplane.api import ManifestError
from modelplane.commands.inputs import read_previous
from modelplane.commands.output import JSON, STDIO, WIDE, YAML, add_manifests, add_output, dump, load_fleet
from modelplane.commands.parsers import Subparsers
from modelplane.json_types import JsonObject
from modelplane.plan import DEFAULT_CONTROL_PLANE, ControlPlane, SecretNeed, gitops_gateway_urls, plan_fleet
from modelplane.references import reference_warnings
from modelplane.render import RenderError
from modelplane.render.gitops import CHARTS_DIR, CLOUD_DIR, LEFT_OUT
from modelplane.render.output import file_names, to_yaml, write_cluster_dirs
from modelplane.scheduler import ACCOUNTING_MODES, DEFAULT_ACCOUNTING, FleetPlacement, place_fleet
from modelplane.vocabulary import Manifest
from modelplane.words import counted


def add_parser(subparsers: Subparsers) -> None:
    p = subparsers.add_parser(
        "render", help="place the fleet and write every cluster's manifests as YAML",
        description="Run the fleet scheduler over a manifest file or directory, plan every "
                    "Kubernetes object each cluster runs (workloads, caches, gateways) and "
                    "write them to OUT_DIR/<cluster>/<kind>-<name>.yaml, one object per file, with the "
                    "serving stack's charts as OUT_DIR/<cluster>/charts/<NN-name>/{release,values}.yaml "
                    "(and the cluster-autoscaler's IAM as cloud/ files), replacing what an earlier run "
                    "wrote. Secrets are referenced, never written.")
    add_manifests(p)
    p.add_argument("out_dir", metavar="OUT_DIR",
                   help="directory to write into; - prints every object to stdout instead (one YAML stream, "
                        "each cluster's objects after a `# cluster: NAME` comment; -o json: one document) "
                        "and the summary to stderr; the charts/ and cloud/ files are written to a directory only")
    p.add_argument("--previous", metavar="FILE",
                   help="previous placement (`plan --json` output); its replicas are kept "
                        "where they still fit")
    p.add_argument("--accounting", choices=ACCOUNTING_MODES, default=DEFAULT_ACCOUNTING,
                   help=f"capacity unit for placement (default: {DEFAULT_ACCOUNTING})")
    p.add_argument("--control-plane", metavar="NAME", default=DEFAULT_CONTROL_PLANE,
                   help="cluster directory of the control-plane gateway when no InferenceGateway names "
                        f"a fleet cluster (default: {DEFAULT_CONTROL_PLANE}, like the stacks' controlPlane)")
    add_output(p, (JSON, YAML, WIDE), json_flag=False,
               what="the summary (wide: every file written); with OUT_DIR -, json or yaml picks the objects' format")
    p.set_defaults(func=run)


def summary_doc(placement: FleetPlacement, manifests: Mapping[str, Sequence[Manifest]],
                secrets: Sequence[SecretNeed] = (), files: Mapping[str, Mapping[str, str]] | None = None
                ) -> JsonObject:
    """The summary as data (`-o json|yaml`): replicas per deployment, objects per cluster by
    kind and the serving stack's other files (charts/, cloud/), the Secrets to create."""
    return {
        "deployments": [{"namespace": d.namespace, "name": d.name, "placed": len(d.replicas), "desired": d.desired}
                        for d in placement.deployments],
        "clusters": {cluster: {"objects": len(objects), "kinds": dict(sorted(Counter(o["kind"] for o in objects)
                                                                                .items())),
                               "files": sorted((files or {}).get(cluster, {}))}
                     for cluster, objects in manifests.items()},
        "secrets": [s.describe() for s in secrets],
    }


def stream(manifests: Mapping[str, Sequence[Manifest]], fmt: str) -> str:
    """Every object for stdout: a YAML stream with a `# cluster:` comment before each cluster's
    objects, or (json) one document {"clusters": {name: [objects]}}."""
    if fmt == JSON:
        return dump({"clusters": {c: list(objects) for c, objects in manifests.items()}}, JSON)
    docs = []
    for cluster, objects in manifests.items():
        docs += [(f"# cluster: {cluster}\n" if i == 0 else "") + to_yaml(o) for i, o in enumerate(objects)]
    return "---\n".join(docs)


def summary(placement: FleetPlacement, manifests: Mapping[str, Sequence[Manifest]],
            secrets: Sequence[SecretNeed] = (), files: Mapping[str, Mapping[str, str]] | None = None) -> str:
    lines = []
    for d in placement.deployments:
        lines.append(f"{d.namespace}/{d.name}: {len(d.replicas)} of {d.desired} replicas placed")
    for cluster, objects in manifests.items():
        kinds = Counter(o["kind"] for o in objects)
        detail = ", ".join(f"{k} {n}" for k, n in sorted(kinds.items())) or "nothing"
        lines.append(f"{cluster}: {len(objects)} objects ({detail})")
        extra = (files or {}).get(cluster, {})
        charts = sorted({p.split("/")[1] for p in extra if p.startswith(f"{CHARTS_DIR}/")})
        if charts:
            lines.append(f"{cluster}: {len(charts)} charts to install in order ({', '.join(charts)}): "
                         f"{CHARTS_DIR}/<NN-name>/release.yaml and values.yaml")
        lines += [f"{cluster}: {p}: what the cluster-autoscaler needs in IAM" for p in sorted(extra)
                  if p.startswith(f"{CLOUD_DIR}/")]
    lines.append(LEFT_OUT)
    if secrets:
        lines.append("create these Secrets in the clusters (their values are never rendered):")
        lines += [f"  {s.describe()}" for s in secrets]
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> int:
    if args.manifests == STDIO and args.out_dir == STDIO:
        print("error: MANIFEST_DIR and OUT_DIR cannot both be -: read the manifests from stdin or write the objects "
              "to stdout", file=sys.stderr)
        return 2
    try:
        fleet = load_fleet(args.manifests)
        previous = read_previous(args.previous) if args.previous else None
        placement = place_fleet(fleet, previous=previous, accounting=args.accounting)
        plan = plan_fleet(fleet, placement, ControlPlane(args.control_plane), egress="reference")
        urls, warnings = gitops_gateway_urls(fleet)
        manifests = plan.manifests(urls)
        files = plan.files()
    except ManifestError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except (RenderError, ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for warning in [*warnings, *reference_warnings(fleet)]:
        print(f"warning: {warning}", file=sys.stderr)
    if args.out_dir == STDIO:
        sys.stdout.write(stream(manifests, args.output or YAML))
        sys.stderr.write(summary(placement, manifests, plan.secrets))
        if files:
            sys.stderr.write(f"not printed: the serving stack's {CHARTS_DIR}/ and {CLOUD_DIR}/ files (not Kubernetes "
                             "objects); give an OUT_DIR to write them\n")
        return 0
    try:
        written = write_cluster_dirs(args.out_dir, manifests, files)
    except OSError as exc:
        print(f"error: cannot write {args.out_dir}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    if args.output in (JSON, YAML):
        doc = {**summary_doc(placement, manifests, plan.secrets, files), "outDir": args.out_dir, "written": written}
        sys.stdout.write(dump(doc, args.output))
        return 0
    sys.stdout.write(summary(placement, manifests, plan.secrets, files))
    if args.output == WIDE:
        sys.stdout.write("".join(f"  {Path(args.out_dir) / cluster / name}\n" for cluster, objects in manifests.items()
                                 for name in [*file_names(objects), *sorted(files.get(cluster, {}))]))
    sys.stdout.write(f"wrote {counted(written, 'file')} under {args.out_dir}\n")
    return 0
