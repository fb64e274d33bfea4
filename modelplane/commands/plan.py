"""`python -m modelplane plan MANIFEST_DIR`: where every replica would run, and why not."""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import sys
import time

from modelplane.api import Fleet
from modelplane.commands.inputs import read_json, read_observed, read_previous
from modelplane.commands.output import JSON, STDIO, WIDE, YAML, add_manifests, add_output, dump, load_fleet
from modelplane.commands.parsers import Subparsers
from modelplane.durations import MAX_READ_TIMEOUT_S, duration_arg
from modelplane.gcpause import gc_paused
from modelplane.observe import CAPACITY_KEY, DEFAULT_READ_TIMEOUT_S, HEALTH_KEY
from modelplane.references import reference_warnings
from modelplane.scheduler import (
    ACCOUNTING_MODES,
    DEFAULT_ACCOUNTING,
    FleetPlacement,
    PlacementFormatError,
    place_fleet,
)
from modelplane.scheduler.placement_report import format_table


def add_parser(subparsers: Subparsers) -> None:
    p = subparsers.add_parser(
        "plan", help="place every ModelDeployment's replicas on the fleet (dry run)",
        description="Run the fleet scheduler over a manifest file or directory and print "
                    "the placement: replicas, engine pools, conditions and, for every "
                    "replica that could not be placed, why each cluster refused it.")
    add_manifests(p)
    p.add_argument("--previous", metavar="FILE",
                   help="previous placement (the -o json output); its replicas are kept "
                        "where they still fit")
    p.add_argument("--accounting", choices=ACCOUNTING_MODES, default=DEFAULT_ACCOUNTING,
                   help="capacity unit: Device (default, packs sub-node engines) or Node "
                        "(the reference: a claiming pod takes a whole node)")
    p.add_argument("--observed", metavar="FILE",
                   help='observed pool sizes as JSON {"cluster": {"pool": nodes}}; '
                        "overrides declared node counts")
    p.add_argument("--observe", metavar="KUBECONFIG_DIR",
                   help="read every cluster that has a kubeconfig here (<cluster>/kubeconfig, "
                        "<cluster>.yaml, ...; a sim state directory works) and place against what is "
                        "really free; other clusters keep their declared sizes (docs/observe.md)")
    p.add_argument("--metrics", metavar="FILE",
                   help='what the ReplicaAutoscalers would do at these numbers: JSON {"<namespace>/<deployment>": '
                        '{"<metric type>": <average per ready replica>}}; a first decision, placed by the '
                        "scheduler (docs/autoscaling.md)")
    p.add_argument("--observe-timeout", metavar="SECONDS", default=DEFAULT_READ_TIMEOUT_S,
                   type=duration_arg("--observe-timeout", MAX_READ_TIMEOUT_S),
                   help=f"time each cluster gets to answer, at most {MAX_READ_TIMEOUT_S:g} "
                        f"(default {DEFAULT_READ_TIMEOUT_S:g})")
    p.add_argument("--explain", metavar="DEPLOYMENT",
                   help="instead of the placement, explain one ModelDeployment (NAMESPACE/NAME, or NAME when one "
                        "namespace has it) cluster by cluster and pool by pool, as `explain` does: the placement "
                        "summarizes why the clusters refused a replica (one line per refusal, with how many "
                        "clusters and a few named), this gives every cluster's reason")
    p.add_argument("--html", metavar="FILE",
                   help="also write the placement as one self-contained HTML page (clusters x deployments, pools' "
                        "devices used and free, unplaced replicas with reasons, routing weights; nothing is fetched "
                        "when it opens); - writes it to stdout instead of the table")
    add_output(p, what="the placement (json: compact, on one line, the --previous schema; pipe it through "
                       "`python -m json.tool` to read it; wide: the table with the devices each replica claims)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # Reading, placing and printing under one pause of the collector: what they build is
    # acyclic, and a collection between a pause for loading and one for placing would scan
    # the whole loaded fleet (a million objects at 1,000 clusters, ~0.1 s) only to find it
    # alive. --observe and --metrics read outside inputs and leave the pause after loading.
    with gc_paused():
        try:
            fleet = load_fleet(args.manifests)
            if args.observe and args.metrics:
                raise ValueError("--metrics does not combine with --observe yet; use --observed FILE for pool sizes")
            if args.html and (args.observe or args.metrics):
                raise ValueError("--html does not combine with --observe or --metrics yet; use --observed FILE for "
                                 "pool sizes")
            if args.html == STDIO and args.output:
                raise ValueError("--html - writes the page to stdout, where -o would write too: give --html a FILE")
            if args.explain and (args.observe or args.metrics or args.html):
                raise ValueError("--explain does not combine with --observe, --metrics or --html; use --observed FILE "
                                 "for pool sizes")
            if not (args.observe or args.metrics):
                previous = read_previous(args.previous) if args.previous else None
                observed = read_observed(args.observed, fleet=fleet) if args.observed else None
        except (ValueError, OSError) as exc:
            return _refused(exc)
        for warning in reference_warnings(fleet):
            print(f"warning: {warning}", file=sys.stderr)
        if args.explain:
            return _explain(args, fleet, previous, observed)
        if not (args.observe or args.metrics):
            placement = place_fleet(fleet, previous=previous, accounting=args.accounting, observed=observed)
            text = _placement_text(placement, args)
            if args.html:
                page = _page(fleet, placement, args, observed)
                if args.html == STDIO:
                    text = page
                else:
                    try:
                        _write_page(args.html, page)
                    except ValueError as exc:
                        return _refused(exc)
            # Nor when the collector resumes: a full collection would scan the million objects
            # of the fleet and its placement once more (~0.1 s at 1,000 clusters) only to find
            # them alive; they are freed when this returns.
            gc.freeze()
            try:
                return _write(text)
            finally:
                gc.unfreeze()
    try:
        if args.observe:
            return _observe(args, fleet)
        previous = read_previous(args.previous) if args.previous else None
        observed = read_observed(args.observed, fleet=fleet) if args.observed else None
        # Deferred: the autoscaler's modules load only for --metrics: plan's start-up is kept small.
        from modelplane.autoscale.metrics_report import format_plan
        from modelplane.reconcile_pass import first_decision, metrics_file_source

        result = first_decision(fleet, metrics_file_source(fleet, args.metrics), previous, now=time.time(),
                                accounting=args.accounting, counts=observed)
        text = format_plan(result.typed(), result.placement, result.outcomes, args.metrics, args.accounting,
                           as_json=args.output in (JSON, YAML))
        return _write(dump(json.loads(text), YAML) if args.output == YAML else text)
    except (ValueError, OSError) as exc:
        return _refused(exc)


def _explain(args: argparse.Namespace, fleet: Fleet, previous: FleetPlacement | None,
             observed: dict[str, dict[str, int]] | None) -> int:
    """`plan --explain DEPLOYMENT`: `explain`'s per-cluster table (modelplane.explain) of one
    deployment, placed with plan's inputs."""
    from modelplane.commands.explain import explained
    from modelplane.explain import find_deployment

    try:
        key = find_deployment(fleet, args.explain)
    except ValueError as exc:
        return _refused(exc)
    return _write(explained(fleet, key, previous=previous, observed=observed, accounting=args.accounting,
                            output=args.output))


def _refused(exc: ValueError | OSError) -> int:
    # A ManifestError says itself what is wrong: "error: 2 problems in the manifests; ..."
    print(f"error: {exc}", file=sys.stderr)
    return 2


def _observe(args: argparse.Namespace, fleet: Fleet) -> int:
    """`plan --observe`: the placement provider's own pass (modelplane.reconcile_pass)."""
    # Deferred: the kube client (httpx, ssl) and the observer cost about a fifth of plan's
    # start-up, which a plan without --observe does not need (benchmarks/scale_plan.py holds plan's
    # start-up goal).
    from modelplane.observe.health import health_from_json, health_to_json
    from modelplane.observe.observation_report import format_capacity
    from modelplane.observe.read import kubeconfigs_in, read_clusters
    from modelplane.reconcile_pass import Observation, run

    previous = read_json(args.previous, "previous placement") if args.previous else None
    observed = read_observed(args.observed, fleet=fleet) if args.observed else None
    kubeconfigs = kubeconfigs_in(args.observe, fleet.clusters)
    try:
        health = health_from_json(previous.get(HEALTH_KEY)) if isinstance(previous, dict) else {}
    except ValueError as exc:
        raise ValueError(f"previous placement {args.previous}: {HEALTH_KEY}: {exc}") from None
    try:
        plan = run(fleet, previous, now=time.time(),
                   accounting=args.accounting, counts=observed,
                   observation=Observation(read_clusters(kubeconfigs, args.observe_timeout), health))
    except PlacementFormatError as exc:
        raise ValueError(f"previous placement {args.previous} is not a placement (the `plan --json` output): "
                         f"{exc}") from None
    assert plan.capacity is not None and plan.health is not None, "an observed pass has its capacity and health"
    if args.output in (JSON, YAML):
        doc = {**plan.placement, CAPACITY_KEY: plan.capacity.to_json()}
        if plan.health:
            doc[HEALTH_KEY] = health_to_json(plan.health)
        return _write(dump(doc, args.output, compact=True))
    return _write(format_table(plan.typed(), args.accounting, wide=args.output == WIDE) + "\n"
                  + format_capacity(plan.capacity, plan.health))


def _page(fleet: Fleet, placement: FleetPlacement, args: argparse.Namespace,
          observed: dict[str, dict[str, int]] | None) -> str:
    # Deferred: the page's modules (the routes' gateway glue) are for --html only.
    from modelplane.picture import placement_page

    return placement_page(fleet, placement, args.accounting, observed, reference_warnings(fleet),
                          title=f"Placement of {'<stdin>' if args.manifests == STDIO else args.manifests}")


def _write_page(path: str, page: str) -> None:
    """The page, written whole or not at all (a temp file beside it, renamed over it)."""
    target = os.path.abspath(path)
    tmp = f"{target}.{os.getpid()}.tmp"
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(page)
        os.replace(tmp, target)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise ValueError(f"cannot write the page to {path}: {exc.strerror or exc}") from None


def _placement_text(placement: FleetPlacement, args: argparse.Namespace) -> str:
    if args.output == JSON:
        # Compact (the C encoder; `indent` switches json to its pure-Python one, 5x slower).
        return placement.to_json_text() + "\n"
    if args.output == YAML:
        return dump(placement.to_json(), YAML)
    return format_table(placement, args.accounting, wide=args.output == WIDE)


def _write(text: str) -> int:
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        # `plan ... | head` closed the pipe early: not an error of the plan.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0
