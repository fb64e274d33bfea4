"""`python -m modelplane demo [MANIFEST_DIR]`: the fleet's data path, run locally.

Plans the fleet with the real scheduler, starts one mock engine per placed replica,
one Traefik per workload cluster and the control-plane Traefik (all on 127.0.0.1,
configured by the same builders the Pulumi program deploys), sends N requests through
every ModelService, prints who served them, and stops everything it started: on
success, on error, and on SIGINT, SIGTERM or SIGHUP (exit 128 + the signal number); a
watchdog stops them even if the demo itself is killed (modelplane.runtime.process).

Hand-written ModelEndpoints point at real providers; the demo never sends traffic
there and starts a local stand-in instead (with a throw-away API key when the
endpoint names a credential, so the header path is exercised too). URLs are printed
without user-info, and no error reaches the user as a traceback.

The data path is secured as the fleet's InferenceGateway says, as deployed: mutual TLS
between the hops always (a CA made for this run); with `spec.tls`, HTTPS at the edge
with a self-signed certificate made for this run (said so; the declared certificateRefs
are cluster Secrets, not read here); with `spec.auth`, a throw-away API key per caller
(every caller a ModelService allows, else one `demo` caller), held in memory and never
printed, and the per-caller limits and allowed callers enforced by the same plugin.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from modelplane.scheduler import FleetPlacement

import argparse
import math
import secrets
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from modelplane.commands.parsers import Subparsers
from modelplane.commands.traffic import format_result, printable, run_split
from modelplane.redact import redact_url
from modelplane.references import reference_warnings
from modelplane.runtime.process import ProcessError, Terminated, terminate_on_signals
from modelplane.scheduler.refusals import refusal_lines
from modelplane.words import counted

if TYPE_CHECKING:
    from modelplane.api import Fleet
    from modelplane.gateway.config import ServiceRoute
    from modelplane.routing import Endpoint
    from modelplane.runtime.fleet import LocalFleet, LocalSecurity
    from modelplane.runtime.scaling import LocalScaler, PassReport

DEFAULT_DIR = "examples/kind"
STOPPED = "stopped every engine and gateway the demo started"


def add_parser(subparsers: Subparsers) -> None:
    p = subparsers.add_parser("demo", help="plan the fleet, run its gateways locally and show each service's split")
    p.add_argument("manifests", nargs="?", default=DEFAULT_DIR,
                   help=f"manifest file or directory (default {DEFAULT_DIR})")
    p.add_argument("-n", type=int, default=200, help="requests per service (default 200)")
    auto = p.add_argument_group("a fleet with a ReplicaAutoscaler (docs/autoscaling.md): the loop runs against "
                                "the local engines while clients drive load in steps (-n does not apply)")
    auto.add_argument("--steps", type=_steps, default=DEFAULT_STEPS, metavar="N,N,...",
                      help=f"clients sending at once in each load step (default {','.join(map(str, DEFAULT_STEPS))})")
    auto.add_argument("--step-seconds", type=_duration("--step-seconds", MAX_STEP_S), default=DEFAULT_STEP_S,
                      metavar="S", help=f"how long each step lasts (default {DEFAULT_STEP_S:g})")
    auto.add_argument("--interval", type=_interval, default=DEFAULT_INTERVAL_S, metavar="DURATION",
                      help="time between the loop's passes: 1s, 500ms (default 1s)")
    auto.add_argument("--settle", type=_duration("--settle", MAX_STEP_S, allow_zero=True), default=0.0, metavar="S",
                      help="after the last step's time, keep its load and the loop running until the loop is at "
                           "rest (no count held by a window or a limit, nothing draining), at most S more seconds "
                           "(default 0: the last step ends on time)")
    p.set_defaults(func=run)


DEFAULT_STEPS = (1, 3, 6, 1)
DEFAULT_STEP_S = 20.0
DEFAULT_INTERVAL_S = 1.0
MAX_STEPS = 100
MAX_STEP_S = 3600.0
MAX_STEP_CLIENTS = 64
MAX_INTERVAL_S = 60.0


def _steps(text: str) -> tuple[int, ...]:
    try:
        steps = tuple(int(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError("expected client counts separated by commas, e.g. 1,3,6,1") from None
    if not 1 <= len(steps) <= MAX_STEPS or not all(0 <= n <= MAX_STEP_CLIENTS for n in steps):
        raise argparse.ArgumentTypeError(f"1..{MAX_STEPS} steps of 0..{MAX_STEP_CLIENTS} clients each")
    return steps


def _duration(flag: str, maximum: float, *, allow_zero: bool = False) -> Callable[[str], float]:
    from modelplane.durations import duration_arg  # one parser for every duration

    return duration_arg(flag, maximum, allow_zero=allow_zero)


def _interval(text: str) -> float:
    from modelplane.durations import DurationError, parse_duration

    try:
        return parse_duration(text, "--interval", maximum=MAX_INTERVAL_S)
    except DurationError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _say(message: str) -> str:
    """Any text the demo prints about what went wrong: URLs without user-info, no
    control characters (log tails and exception texts come from other programs)."""
    return "\n".join(printable(redact_url(line), 2000) for line in message.splitlines())


def _placement_lines(placement: FleetPlacement) -> list[str]:
    lines = ["placement:"]
    for dp in placement.deployments:
        where = ", ".join(f"{r.name}@{r.cluster}" for r in dp.replicas) or "nothing placed"
        lines.append(f"  {dp.namespace}/{dp.name}: {len(dp.replicas)}/{dp.desired} replicas: {where}")
        for u in dp.unplaced:
            why = "; ".join(refusal_lines(u.refusals))
            lines.append(f"    replica {u.index} not placed: {why}")
    return lines


def _weights_lines(route: ServiceRoute) -> list[str]:
    if not route.backends:
        return [f"  {route.namespace}/{route.name}: no ready endpoint, no route (404)"]
    balancing = " (CacheAware: kvroute picks the cluster and the replica)" if route.cache_aware else ""
    lines = [f"  {route.namespace}/{route.name}:{balancing}"]
    for b in route.backends:
        where = "external" if b.endpoint.external else b.endpoint.cluster
        lines.append(f"    entry {b.entry} (priority {b.priority}) -> {b.endpoint.name} [{where}] weight {b.weight}")
    return lines


def run(args: argparse.Namespace) -> int:
    try:
        with terminate_on_signals():
            return _run(args)
    except Terminated as t:
        print(f"demo: interrupted by {t.name}; {STOPPED}", file=sys.stderr)
        return 128 + t.signum
    except (ProcessError, OSError) as e:
        print(f"demo: {_say(str(e))}", file=sys.stderr)
        return 1
    except Exception as e:  # noqa: BLE001 - last resort: a message, never a traceback
        print(f"demo: unexpected error ({type(e).__name__}): {_say(str(e))[:500]}", file=sys.stderr)
        return 1


def _run(args: argparse.Namespace) -> int:
    # Imported when the demo runs: `python -m modelplane` imports every command to build
    # its parser, and the other commands need none of this (pydantic models, scheduler).
    from modelplane.api import ManifestError, load_manifests
    from modelplane.gateway.fleet import fleet_routes, placement_endpoints
    from modelplane.render import RenderError
    from modelplane.runtime.fleet import LocalFleet
    from modelplane.scheduler import place_fleet

    if args.n < 1:
        print("demo: -n must be at least 1", file=sys.stderr)
        return 2
    if not Path(args.manifests).exists():
        print(f"demo: {args.manifests}: no such file or directory", file=sys.stderr)
        return 2
    try:
        fleet = load_manifests(args.manifests)
    except ManifestError as e:
        print(f"demo: {_say(str(e))}", file=sys.stderr)
        return 2
    except Exception as e:  # noqa: BLE001 - the loader's errors are ManifestError; anything else is a bug there
        print(f"demo: {args.manifests}: could not be loaded ({type(e).__name__}); `python -m modelplane lint "
              f"{args.manifests}` says more", file=sys.stderr)
        return 2
    if not fleet.services:
        print(f"demo: {args.manifests} defines no ModelService, nothing to route", file=sys.stderr)
        return 2
    try:
        security = local_security(fleet)
    except RenderError as e:
        print(f"demo: {_say(str(e))}", file=sys.stderr)
        return 2
    for warning in reference_warnings(fleet):
        print(f"warning: {_say(warning)}", file=sys.stderr, flush=True)
    if fleet.autoscalers:
        return _autoscaling(args, fleet, security)
    placement = place_fleet(fleet)
    print("\n".join(_placement_lines(placement)), flush=True)
    if not any(d.replicas for d in placement.deployments) and not fleet.endpoints:
        print(f"demo: nothing placed, so no service has anything to route to; `modelplane explain {args.manifests} "
              "DEPLOYMENT` says why, per cluster and pool", file=sys.stderr)
        return 1

    failed = 0
    with LocalFleet(security=security, kvroute=fleet.cache_aware()) as local:
        keys = _callers(local, fleet)
        print("\n".join(_security_lines(local, keys)), flush=True)
        endpoints = []
        for ep in placement_endpoints(fleet, placement):
            if ep.external:
                ep = _stand_in(local, ep)
            endpoints.append(ep)
        endpoints = local.start_engines(endpoints)
        routes = local.apply_routes(fleet_routes(fleet, endpoints), endpoints)
        print("weights:")
        for r in routes:
            print("\n".join(_weights_lines(r)))
        if not any(r.backends for r in routes):
            print("demo: no service has anything to route to (see the weights above)", file=sys.stderr)
            return 1
        for r in routes:
            if not r.backends:
                continue
            caller = _caller_for(fleet, r.namespace, r.name, keys)
            res = run_split(local.service_url(r.namespace, r.name), args.n, api_key=keys.get(caller or ""),
                            cafile=local.edge_cert.cert if local.edge_cert else None)
            if caller:
                print(f"{r.namespace}/{r.name}: as caller {caller}", flush=True)
            failed += res.failed
            print(format_result(res, _idle(r, endpoints)), flush=True)
        lines, wrong = _refusals(local, fleet, routes, endpoints, keys)
        print("\n".join(lines), flush=True)
        failed += wrong
    print(STOPPED)
    return 1 if failed else 0


# A rate the demo exhausts as it is: this many requests at once at most, refilled at one a second
# at most (faster, and one request after the other might never run it dry); past it, the check
# runs with the rate lowered (and says so), rather than sending thousands of requests.
MAX_RATE_PROBE = 50
MAX_PROBED_PER_MINUTE = 60


def _refusals(local: LocalFleet, fleet: Fleet, routes: list[ServiceRoute], endpoints: list[Endpoint],
              keys: dict[str, str]) -> tuple[list[str], int]:
    """With caller keys, what the gateway refuses, one check each against the answer it must
    give: no API key (401), a caller the service does not allow (403), a caller over its rate
    (429 with Retry-After). (lines, how many checks got another answer)."""
    from modelplane.commands.traffic import probe

    sec = local.security
    routed = [r for r in routes if r.backends]
    if sec is None or not sec.auth or not keys or not routed:
        return [], 0
    cafile = local.edge_cert.cert if local.edge_cert else None
    lines = ["refusals:"]
    wrong = 0

    def check(what: str, url: str, key: str | None, want: int, tries: int = 1) -> None:
        nonlocal wrong
        status, said = None, ""
        sent = 0
        while sent < tries and status != want:
            status, said = probe(url, key, cafile=cafile)
            sent += 1
        took = f" after {counted(sent, 'request')}" if tries > 1 else ""
        verdict = "as expected" if status == want else f"EXPECTED {want}"
        lines.append(f"  {what}: {status if status is not None else said}{took}"
                     + (f" ({said})" if said and status is not None else "") + f", {verdict}")
        wrong += status != want

    first = routed[0]
    first_url = local.service_url(first.namespace, first.name)
    check(f"{first.namespace}/{first.name} without an API key", first_url, None, 401)
    outsider = next(((r, c) for r in routed for c in sorted(keys)
                     if sec.allowed.get((r.namespace, r.name)) and c not in sec.allowed[(r.namespace, r.name)]), None)
    if outsider is None:
        lines.append("  a caller a service does not allow: no ModelService names its allowedCallers")
    else:
        r, caller = outsider
        allowed = ", ".join(sec.allowed[(r.namespace, r.name)])
        check(f"caller {caller} on {r.namespace}/{r.name} (allowedCallers: {allowed})",
              local.service_url(r.namespace, r.name), keys[caller], 403)
    limits = sec.limits
    if not limits.requests_per_minute:
        lines.append("  a caller over its rate: the gateway sets no spec.limits.perCaller.requestsPerMinute")
        return lines, wrong
    at_once = limits.burst or max(1, math.ceil(limits.requests_per_minute / 60))
    rate = f"{limits.requests_per_minute}/min, {at_once} at once"
    if at_once > MAX_RATE_PROBE or limits.requests_per_minute > MAX_PROBED_PER_MINUTE:
        # The same plugin and code path, with a rate this check can exhaust in two requests.
        local.security = replace(sec, limits=replace(limits, requests_per_minute=1, burst=1))
        local.apply_routes(routes, endpoints)
        rate = f"lowered to 1/min for this check; the gateway's is {rate}"
        at_once = 1
    caller = _caller_for(fleet, first.namespace, first.name, keys) or DEMO_CALLER
    check(f"caller {caller} over its rate ({rate})", first_url, keys.get(caller), 429, tries=at_once + 2)
    return lines, wrong


def _autoscaling(args: argparse.Namespace, fleet: Fleet, security: LocalSecurity) -> int:
    """The loop (modelplane.runtime.scaling) every `--interval` while `--steps` clients per
    service send requests, one step every `--step-seconds`; a line per step says how many
    replicas serve each autoscaled deployment and where, and how many requests failed."""
    import time

    from modelplane.commands.traffic import Load
    from modelplane.runtime.fleet import LocalFleet  # imported when the demo runs (see _run)
    from modelplane.runtime.scaling import LocalScaler
    from modelplane.scheduler import FleetPlacement

    targets = sorted(a.target_key for a in fleet.autoscalers.values())
    with LocalFleet(security=security, kvroute=fleet.cache_aware()) as local:
        keys = _callers(local, fleet)
        print("\n".join(_security_lines(local, keys)), flush=True)
        scaler = LocalScaler(local, fleet)
        first = scaler.start()
        print("\n".join(_placement_lines(FleetPlacement.from_json(scaler.placement or {"deployments": []}))),
              flush=True)
        for scaler_ in sorted(fleet.autoscalers.values(), key=lambda a: a.target_key):
            spec = scaler_.spec
            print(f"autoscaling {scaler_.target_key[0]}/{scaler_.target_key[1]} (ReplicaAutoscaler "
                  f"{scaler_.metadata.namespace}/{scaler_.name}): {spec.min_replicas}..{spec.max_replicas} replicas on "
                  + ", ".join(f"{m.type} {m.target.average_value:g}" for m in spec.metrics), flush=True)
        print(f"loop every {args.interval:g} s; load steps of {args.step_seconds:g} s: "
              f"{', '.join(str(n) for n in args.steps)} client(s) per service", flush=True)
        routed = sorted({(r.namespace, r.name) for r in scaler.routes() if r.backends})
        loads = {}
        for ns, name in routed:
            caller = _caller_for(fleet, ns, name, keys)
            loads[(ns, name)] = Load(local.service_url(ns, name), api_key=keys.get(caller or ""),
                                     cafile=local.edge_cert.cert if local.edge_cert else None)
        report = first
        try:
            for number, clients in enumerate(args.steps, 1):
                marks = {k: len(load.served) for k, load in loads.items()}
                for load in loads.values():
                    load.set_clients(clients)
                end = time.monotonic() + args.step_seconds
                while time.monotonic() < end:
                    report = _pass(scaler, end, args.interval)
                if number == len(args.steps) and args.settle > 0:
                    report = _settle(scaler, report, args.settle, args.interval)
                for key, load in loads.items():
                    served = load.served[marks[key]:]
                    bad = sum(1 for _, replica in served if replica is None)
                    where = "; ".join(
                        f"{ns}/{dep}: {report.counts.get((ns, dep), 0)} replica(s) ("
                        + ", ".join(f"{c} {n}" for c, n in sorted(report.clusters.get((ns, dep), {}).items()))
                        + ")" for ns, dep in targets)
                    print(f"step {number}: {clients} client(s) on {key[0]}/{key[1]}: {where}; {len(served)} requests, "
                          f"{bad} failed", flush=True)
        finally:
            results = {k: load.stop() for k, load in loads.items()}
        for (ns, name), res in results.items():
            print(f"{ns}/{name}: every step", flush=True)
            print(format_result(res), flush=True)
        failed = sum(res.failed for res in results.values())
    print(STOPPED)
    return 1 if failed else 0


def _pass(scaler: LocalScaler, end: float, interval: float) -> PassReport:
    """One pass of the loop, its lines printed, then a wait until the next (or `end`)."""
    import time

    began = time.monotonic()
    report = scaler.cycle()
    for line in report.lines():
        print(line, flush=True)
    time.sleep(max(0.0, min(end, began + interval) - time.monotonic()))
    return report


def _settle(scaler: LocalScaler, report: PassReport, most: float, interval: float) -> PassReport:
    """`--settle`: passes until the loop is at rest (PassReport.unsettled), at most `most` s."""
    import time

    began = time.monotonic()
    end = began + most
    while report.unsettled() and time.monotonic() < end:
        report = _pass(scaler, end, interval)
    waited = time.monotonic() - began
    why = report.unsettled()
    if why:
        print(f"  not at rest after --settle {most:g} s: {'; '.join(why)}", flush=True)
    else:
        print(f"  at rest {waited:.1f} s after the step's time", flush=True)
    return report


DEMO_CALLER = "demo"


def local_security(fleet: Fleet) -> LocalSecurity:
    """The protections the local data path runs with: the fleet's InferenceGateway's, as the
    cluster plan reads them (modelplane.plan.gateway), and mutual TLS between the hops."""
    from modelplane.plan.gateway import plan_edge
    from modelplane.runtime.fleet import LocalSecurity  # imported when the demo runs (see _run)

    edge = plan_edge(fleet).security
    if edge is None:
        return LocalSecurity(edge_tls=False, auth=False)
    return LocalSecurity(edge_tls=edge.tls is not None, auth=edge.auth, plain_http=edge.plain_http,
                         limits=edge.limits, allowed=dict(edge.allowed))


def _callers(local: LocalFleet, fleet: Fleet) -> dict[str, str]:
    """A throw-away key per caller identity when the gateway authenticates (never printed)."""
    if local.security is None or not local.security.auth:
        return {}
    names = sorted({c for callers in local.security.allowed.values() for c in callers}) or [DEMO_CALLER]
    if any(not svc.spec.allowed_callers for svc in fleet.services.values()) and DEMO_CALLER not in names:
        names.append(DEMO_CALLER)
    keys = {name: secrets.token_urlsafe(24) for name in names}
    local.set_callers(keys)
    return keys


def _caller_for(fleet: Fleet, namespace: str, service: str, keys: dict[str, str]) -> str | None:
    if not keys:
        return None
    allowed = fleet.services[(namespace, service)].spec.allowed_callers
    return allowed[0] if allowed else DEMO_CALLER


def _security_lines(local: LocalFleet, keys: dict[str, str]) -> list[str]:
    sec = local.security
    lines = ["data path:", "  between the hops: mutual TLS, from a CA made for this run"]
    if sec is not None and sec.edge_tls:
        plain = {"Refuse": "refused", "Redirect": "redirected"}[sec.plain_http]
        lines.append(f"  edge: HTTPS with a SELF-SIGNED certificate made for this run (plain HTTP: {plain}); "
                     "clients must be given it to trust")
    else:
        lines.append("  edge: plain HTTP (the InferenceGateway has no spec.tls)")
    if keys:
        lines.append(f"  callers: {', '.join(sorted(keys))}, each with a throw-away API key (kept in memory, "
                     "never printed)")
    return lines


def _idle(route: ServiceRoute, endpoints: list[Endpoint]) -> dict[str, str]:
    """Every replica of the deployments this service routes to, routed or not."""
    deps = {b.endpoint.deployment for b in route.backends if not b.endpoint.external}
    return {ep.name: ep.deployment or ep.name for ep in endpoints
            if not ep.external and ep.namespace == route.namespace and ep.deployment in deps}


def _stand_in(local: LocalFleet, ep: Endpoint) -> Endpoint:
    env, extra = {}, []
    if ep.credential is not None:
        key = secrets.token_urlsafe(24)
        local.secrets[(ep.namespace, ep.credential.secret_name, ep.credential.key)] = key
        env = {"MODELPLANE_STANDIN_KEY": key}
        extra = ["--api-key-env", "MODELPLANE_STANDIN_KEY"]
    eng = local.start_engine(ep.name, None, extra, env)
    print(f"external endpoint {ep.namespace}/{ep.name} ({redact_url(ep.url)}): served by a local stand-in, "
          f"no traffic leaves 127.0.0.1", flush=True)
    return replace(ep, url=eng.url, api_prefix="/v1")
